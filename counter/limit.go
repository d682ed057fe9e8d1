package main

import (
	"context"
	"net/http"
	"strconv"

	"github.com/freqcap/freqcap/ratelimit"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// setHeaders writes the IETF RateLimit fields of an answer, and
// Retry-After (seconds, rounded up) when it is refused.
func setHeaders(h http.Header, p *ratelimit.Policy, a *counting.LimitAnswer) {
	// The keys as Header.Set would write them (canonical), without its
	// canonicalization on every answer.
	if a.Degraded {
		h["Freqcap-Degraded"] = []string{"true"}
		return
	}
	h["Ratelimit-Policy"] = []string{p.Header()}
	h["Ratelimit"] = []string{p.RateLimit(a)}
	if !a.Allowed && a.RetryAfterMs > 0 {
		h["Retry-After"] = []string{strconv.FormatInt(ratelimit.CeilDiv(a.RetryAfterMs, 1000), 10)}
	}
}

// maxLimitBody bounds the body of one check.
const maxLimitBody = 16 << 10

// handleLimit is POST /v1/limit: one check, answered 200 whether admitted
// or refused, with the RateLimit fields.
func handleLimit(l *ratelimit.Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.LimitRequest
		if err := decodeBody(w, r, maxLimitBody, &req, `{"key":...,"policy":...} or {"key":...,"algorithm":...,"limit":...,"period":...}`); err != nil {
			httpjson.Error(w, r, l.Log, err)
			return
		}
		pols, as, err := l.Check(checkContext(r), []counting.LimitRequest{req}, false)
		if err != nil {
			httpjson.Error(w, r, l.Log, err)
			return
		}
		setHeaders(w.Header(), pols[0], &as[0])
		httpjson.WriteRaw(w, http.StatusOK, appendLimitAnswer(make([]byte, 0, 160), &as[0]))
	})
}

// handleLimitBatch is POST /v1/limit/batch: checks answered in order; one
// invalid check refuses the batch and nothing is consumed.
func handleLimitBatch(l *ratelimit.Checker, maxChecks int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.LimitBatch
		if err := decodeBody(w, r, batchBody(maxChecks), &req, `{"checks":[...]}`); err != nil {
			httpjson.Error(w, r, l.Log, err)
			return
		}
		if len(req.Checks) == 0 || len(req.Checks) > maxChecks {
			httpjson.Error(w, r, l.Log, apierr.Invalid("checks must hold 1 to %d checks, got %d", maxChecks, len(req.Checks)))
			return
		}
		_, as, err := l.Check(checkContext(r), req.Checks, true)
		if err != nil {
			httpjson.Error(w, r, l.Log, err)
			return
		}
		b := append(make([]byte, 0, 32+160*len(as)), `{"code":0,"results":[`...)
		for i := range as {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLimitAnswer(b, &as[i])
		}
		httpjson.WriteRaw(w, http.StatusOK, append(b, "]}"...))
	})
}

// handleGate is GET /v1/limit/gate?policy=..&key=..[&cost=..][&deny=403]
// for reverse proxies (nginx auth_request, Envoy ext_authz, Traefik
// forwardAuth): 204 when admitted, 429 (or 403: nginx passes on only 401
// and 403) when refused, with the RateLimit fields; 400 with the JSON
// error for bad input.
func handleGate(l *ratelimit.Checker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Params(r, map[string]bool{"key": false, "policy": false, "mode": false, "cost": false, "deny": false})
		if err != nil {
			httpjson.Error(w, r, l.Log, err)
			return
		}
		req := counting.LimitRequest{Key: q.Get("key"), Policy: q.Get("policy"), Mode: q.Get("mode")}
		if req.Policy == "" {
			httpjson.Error(w, r, l.Log, apierr.Invalid("policy is required: the gate checks named policies"))
			return
		}
		if c := q.Get("cost"); c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil {
				httpjson.Error(w, r, l.Log, apierr.Invalid("cost must be an integer, got %q", c))
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
			httpjson.Error(w, r, l.Log, apierr.Invalid("deny must be 429 or 403 (for nginx auth_request), got %q", d))
			return
		}
		pols, as, err := l.Check(checkContext(r), []counting.LimitRequest{req}, false)
		if err != nil {
			httpjson.Error(w, r, l.Log, err)
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

// checkContext is the context of a request's checks: its values, not its
// cancellation. A check is bounded by its own timeout, and one that has
// gone to Redis is answered even if the client left; a child of a context
// that can be cancelled costs a registration with it on every check.
func checkContext(r *http.Request) context.Context { return context.WithoutCancel(r.Context()) }

// appendLimitAnswer appends a as encoding/json writes counting.LimitAnswer
// (the same fields, in order, the same omissions; a msg that needs
// escaping goes through encoding/json).
func appendLimitAnswer(b []byte, a *counting.LimitAnswer) []byte {
	b = strconv.AppendBool(append(b, `{"allowed":`...), a.Allowed)
	b = strconv.AppendInt(append(b, `,"remaining":`...), a.Remaining, 10)
	b = strconv.AppendInt(append(b, `,"retryAfterMs":`...), a.RetryAfterMs, 10)
	b = strconv.AppendInt(append(b, `,"resetAfterMs":`...), a.ResetAfterMs, 10)
	b = strconv.AppendInt(append(b, `,"delayMs":`...), a.DelayMs, 10)
	b = strconv.AppendBool(append(b, `,"shadowed":`...), a.Shadowed)
	b = strconv.AppendBool(append(b, `,"degraded":`...), a.Degraded)
	if a.Code != 0 {
		b = strconv.AppendInt(append(b, `,"code":`...), int64(a.Code), 10)
	}
	if a.Msg != "" {
		b = appendJSONString(append(b, `,"msg":`...), a.Msg)
	}
	if len(a.Limits) > 0 {
		b = append(b, `,"limits":[`...)
		for i := range a.Limits {
			d := &a.Limits[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendBool(append(b, `{"allowed":`...), d.Allowed)
			b = strconv.AppendInt(append(b, `,"remaining":`...), d.Remaining, 10)
			b = strconv.AppendInt(append(b, `,"retryAfterMs":`...), d.RetryAfterMs, 10)
			b = strconv.AppendInt(append(b, `,"resetAfterMs":`...), d.ResetAfterMs, 10)
			b = strconv.AppendInt(append(b, `,"delayMs":`...), d.DelayMs, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}
