package main

import (
	"context"
	"fmt"
	"github.com/freqcap/freqcap/core"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// limiter serves the rate-limit checks over HTTP and RPC.
// A check is bounded by COUNTER_READ_TIMEOUT, like a read: it sits on its
// caller's critical path. When Redis cannot decide in time the check fails
// open (admitted, degraded), counted and logged at most once a second.
type limiter struct {
	log      *slog.Logger
	store    *core.Store
	lim      *core.Limits
	policies map[string]*policy
	timeout  time.Duration
	metrics  *metrics
	sometime rate.Sometimes
}

// check resolves and decides every check, all validated before any is
// decided; the error is a bad check (400), nothing consumed.
func (l *limiter) check(ctx context.Context, reqs []counting.LimitRequest, batch bool) ([]*policy, []counting.LimitAnswer, error) {
	pols := make([]*policy, len(reqs))
	items := make([]counting.Item, len(reqs))
	for i := range reqs {
		field := ""
		if batch {
			field = fmt.Sprintf("checks[%d].", i)
		}
		var err error
		if pols[i], items[i], err = resolve(l.policies, l.lim, &reqs[i], field); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res := l.store.WriteOrSkip(ctx, items)
	out := make([]counting.LimitAnswer, len(res))
	for i, r := range res {
		a := &out[i]
		outcome := "allowed"
		switch {
		case r.Code != 0:
			*a = counting.LimitAnswer{Allowed: true, Degraded: true, Code: r.Code, Msg: r.Msg}
			outcome = "degraded"
			l.sometime.Do(func() {
				l.log.WarnContext(ctx, "rate-limit check failed open", "policy", pols[i].name, "code", r.Code, "err", r.Msg)
			})
		default:
			*a = counting.LimitAnswer{Allowed: r.Allowed, Remaining: r.Remaining, RetryAfterMs: r.RetryAfterMs,
				ResetAfterMs: r.ResetAfterMs, DelayMs: r.DelayMs, Shadowed: r.Shadowed, Limits: r.Limits}
			switch {
			case items[i].Hits == 0:
				outcome = "peeked"
			case r.Shadowed:
				outcome = "shadowed"
			case !r.Allowed:
				outcome = "refused"
			}
		}
		l.metrics.limitChecks.WithLabelValues(pols[i].name, outcome).Inc()
	}
	return pols, out, nil
}

// setHeaders writes the IETF RateLimit fields of an answer, and
// Retry-After (seconds, rounded up) when it is refused.
func setHeaders(h http.Header, p *policy, a *counting.LimitAnswer) {
	if a.Degraded {
		h.Set("Freqcap-Degraded", "true")
		return
	}
	h.Set("RateLimit-Policy", p.header)
	h.Set("RateLimit", p.rateLimit(a))
	if !a.Allowed && a.RetryAfterMs > 0 {
		h.Set("Retry-After", strconv.FormatInt(ceilDiv(a.RetryAfterMs, 1000), 10))
	}
}

// maxLimitBody bounds the body of one check.
const maxLimitBody = 16 << 10

// handleLimit is POST /v1/limit: one check, answered 200 whether admitted
// or refused, with the RateLimit fields.
func handleLimit(l *limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.LimitRequest
		if err := decodeBody(w, r, maxLimitBody, &req, `{"key":...,"policy":...} or {"key":...,"algorithm":...,"limit":...,"period":...}`); err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		pols, as, err := l.check(r.Context(), []counting.LimitRequest{req}, false)
		if err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		setHeaders(w.Header(), pols[0], &as[0])
		httpjson.Write(w, http.StatusOK, as[0])
	})
}

// handleLimitBatch is POST /v1/limit/batch: checks answered in order; one
// invalid check refuses the batch and nothing is consumed.
func handleLimitBatch(l *limiter, maxChecks int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.LimitBatch
		if err := decodeBody(w, r, batchBody(maxChecks), &req, `{"checks":[...]}`); err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		if len(req.Checks) == 0 || len(req.Checks) > maxChecks {
			httpjson.Error(w, r, l.log, apierr.Invalid("checks must hold 1 to %d checks, got %d", maxChecks, len(req.Checks)))
			return
		}
		_, as, err := l.check(r.Context(), req.Checks, true)
		if err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, counting.LimitBatchAnswer{Results: as})
	})
}

// handleGate is GET /v1/limit/gate?policy=..&key=..[&cost=..][&deny=403]
// for reverse proxies (nginx auth_request, Envoy ext_authz, Traefik
// forwardAuth): 204 when admitted, 429 (or 403: nginx passes on only 401
// and 403) when refused, with the RateLimit fields; 400 with the JSON
// error for bad input.
func handleGate(l *limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Params(r, map[string]bool{"key": false, "policy": false, "mode": false, "cost": false, "deny": false})
		if err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		req := counting.LimitRequest{Key: q.Get("key"), Policy: q.Get("policy"), Mode: q.Get("mode")}
		if req.Policy == "" {
			httpjson.Error(w, r, l.log, apierr.Invalid("policy is required: the gate checks named policies"))
			return
		}
		if c := q.Get("cost"); c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil {
				httpjson.Error(w, r, l.log, apierr.Invalid("cost must be an integer, got %q", c))
				return
			}
			req.Cost = &n
		}
		deny := http.StatusTooManyRequests
		switch d := q.Get("deny"); d {
		case "", "429":
		case "403":
			deny = http.StatusForbidden
		default:
			httpjson.Error(w, r, l.log, apierr.Invalid("deny must be 429 or 403 (for nginx auth_request), got %q", d))
			return
		}
		pols, as, err := l.check(r.Context(), []counting.LimitRequest{req}, false)
		if err != nil {
			httpjson.Error(w, r, l.log, err)
			return
		}
		setHeaders(w.Header(), pols[0], &as[0])
		if as[0].Allowed {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(deny)
	})
}
