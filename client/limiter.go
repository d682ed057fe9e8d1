package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
)

// Limiter checks rate limits on the counter (POST /v1/limit).
// Checks have a deadline and fail open: when the counter cannot answer in
// time, the check is admitted, Degraded, with an error saying why.
//
// With Local set, it also limits on the caller's side, and is never
// stricter than the counter: once the counter refuses a check with a
// Retry-After, the same check (policy or rule, key, and a cost at least
// as high) is answered refused locally (Verdict.Local), without a round
// trip, until that time has passed; then the counter is asked again. It
// refuses nothing the counter has not refused: a local model of a
// policy's limits (a token bucket at its slowest rate, say) would refuse
// hits the counter admits, as a policy of 5 a minute and 20 a day did for
// an hour after 5 hits.
type Limiter struct {
	endpoint string
	hc       *http.Client
	timeout  time.Duration
	local    bool
	now      func() time.Time

	mu      sync.Mutex
	learned map[string]*learned
}

// LimiterOptions tune a Limiter. The zero value is usable.
type LimiterOptions struct {
	// Timeout bounds a check; 0 means 10 ms.
	Timeout time.Duration
	// Local limits on the caller's side as well (see Limiter).
	Local bool
	// HTTPClient sends the checks; nil means a pooled HTTP/1.1 client.
	HTTPClient *http.Client
	// Token is the counter's bearer token (COUNTER_AUTH_TOKENS); empty
	// sends none.
	Token string
}

// Verdict is the answer to a check.
type Verdict struct {
	counting.LimitAnswer
	// Local is set when the local limiter answered without asking the
	// counter.
	Local bool
}

// RetryAfter is how long to wait before the same check could be admitted;
// 0 when admitted, negative when never.
func (v Verdict) RetryAfter() time.Duration {
	return time.Duration(v.RetryAfterMs) * time.Millisecond
}

// learned is what the counter said about one check: refused until
// blocked for a cost of at least cost.
type learned struct {
	blocked time.Time
	cost    int64
}

// NewLimiter returns a Limiter for the counter at counterURL.
func NewLimiter(counterURL string, opts LimiterOptions) (*Limiter, error) {
	u, err := url.Parse(counterURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("freqcap client: counter URL must be http(s)://host:port, got %q", counterURL)
	}
	l := &Limiter{
		endpoint: strings.TrimSuffix(counterURL, "/") + "/v1/limit",
		hc:       opts.HTTPClient,
		timeout:  opts.Timeout,
		local:    opts.Local,
		now:      time.Now,
		learned:  map[string]*learned{},
	}
	l.hc = withToken(l.hc, &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}, opts.Token)
	if l.timeout <= 0 {
		l.timeout = 10 * time.Millisecond
	}
	return l, nil
}

// Allow checks one hit of key against a named policy.
func (l *Limiter) Allow(ctx context.Context, policy, key string) (Verdict, error) {
	return l.Check(ctx, counting.LimitRequest{Policy: policy, Key: key})
}

// Check sends one check (a named policy or an inline rule). An invalid
// check is an error and a refused Verdict; a counter that cannot answer is
// an error and an admitted, Degraded one.
func (l *Limiter) Check(ctx context.Context, req counting.LimitRequest) (Verdict, error) {
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	id := req.Policy + "\x00" + req.Key
	if req.Policy == "" {
		b, _ := json.Marshal(req)
		id = string(b)
	}
	if l.local && cost > 0 {
		if v, refused := l.refuseLocally(id, cost); refused {
			return v, nil
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return Verdict{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return Verdict{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(hreq)
	if err != nil {
		return failOpen(err), fmt.Errorf("freqcap client: rate-limit check failed open: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return failOpen(err), fmt.Errorf("freqcap client: rate-limit check failed open: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		}
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode == http.StatusBadRequest {
			return Verdict{}, fmt.Errorf("freqcap client: invalid check (code %d): %s", e.Code, e.Msg)
		}
		return failOpen(nil), fmt.Errorf("freqcap client: rate-limit check failed open: counter answered %d: %s", resp.StatusCode, e.Msg)
	}
	var v Verdict
	if err := json.Unmarshal(b, &v.LimitAnswer); err != nil {
		return failOpen(err), fmt.Errorf("freqcap client: rate-limit check failed open: %w", err)
	}
	if l.local && !v.Degraded {
		l.learn(id, &v.LimitAnswer, cost)
	}
	return v, nil
}

func failOpen(err error) Verdict {
	v := Verdict{LimitAnswer: counting.LimitAnswer{Allowed: true, Degraded: true}}
	if err != nil {
		v.Msg = err.Error()
	}
	return v
}

// refuseLocally answers a check the counter refused, until its
// Retry-After has passed.
func (l *Limiter) refuseLocally(id string, cost int64) (Verdict, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.learned[id]
	if s == nil {
		return Verdict{}, false
	}
	now := l.now()
	if !now.Before(s.blocked) {
		delete(l.learned, id)
		return Verdict{}, false
	}
	if cost < s.cost {
		return Verdict{}, false
	}
	return Verdict{Local: true, LimitAnswer: counting.LimitAnswer{RetryAfterMs: s.blocked.Sub(now).Milliseconds() + 1}}, true
}

// learn keeps a refusal's Retry-After, and forgets it once the counter
// admits the check.
func (l *Limiter) learn(id string, a *counting.LimitAnswer, cost int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.Allowed || a.Shadowed || a.RetryAfterMs <= 0 {
		delete(l.learned, id)
		return
	}
	now := l.now()
	if len(l.learned) >= maxLearned {
		for k, s := range l.learned {
			if !now.Before(s.blocked) {
				delete(l.learned, k)
			}
		}
		if len(l.learned) >= maxLearned {
			return // full of live refusals: the counter answers this one
		}
	}
	l.learned[id] = &learned{blocked: now.Add(time.Duration(a.RetryAfterMs) * time.Millisecond), cost: cost}
}

// maxLearned bounds the refusals a Limiter keeps.
const maxLearned = 100_000
