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

	"github.com/dunglas/httpsfv"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/counting"
)

// Limiter checks rate limits on the counter (POST /v1/limit, seed 004).
// Checks have a deadline and fail open: when the counter cannot answer in
// time, the check is admitted, Degraded, with an error saying why.
//
// With Local set, it also limits on the caller's side: it learns each
// policy's rate from the counter's RateLimit-Policy field (q per w
// seconds) and keeps a golang.org/x/time/rate limiter per policy and key,
// started at the remaining the counter reported; a check that limiter
// refuses, or one made before a refusal's Retry-After has passed, is
// answered refused locally (Verdict.Local) without a round trip. The
// counter stays the authority: the local limiter only stops a caller from
// sending what would be refused.
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

// learned is what the counter said about one policy and key.
type learned struct {
	lim     *rate.Limiter // nil until a RateLimit-Policy was seen
	blocked time.Time     // refused until then (a Retry-After)
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
		l.learn(id, resp.Header, &v.LimitAnswer, cost)
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

// refuseLocally answers a check the local limiter refuses.
func (l *Limiter) refuseLocally(id string, cost int64) (Verdict, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.learned[id]
	if s == nil {
		return Verdict{}, false
	}
	now := l.now()
	refused := Verdict{Local: true}
	if now.Before(s.blocked) {
		refused.RetryAfterMs = s.blocked.Sub(now).Milliseconds() + 1
		return refused, true
	}
	if s.lim == nil {
		return Verdict{}, false
	}
	r := s.lim.ReserveN(now, int(cost))
	if !r.OK() {
		refused.RetryAfterMs = -1
		return refused, true
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		refused.RetryAfterMs = d.Milliseconds() + 1
		return refused, true
	}
	return Verdict{}, false
}

// learn keeps what an answer says: the policy's rate (the slowest of its
// limits), the remaining the counter reported, a refusal's retry-after.
func (l *Limiter) learn(id string, h http.Header, a *counting.LimitAnswer, cost int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.learned[id]
	if s == nil {
		s = &learned{}
		l.learned[id] = s
	}
	now := l.now()
	if !a.Allowed && !a.Shadowed && a.RetryAfterMs > 0 {
		s.blocked = now.Add(time.Duration(a.RetryAfterMs) * time.Millisecond)
	}
	if s.lim != nil {
		return
	}
	q, w, ok := slowestPolicy(h.Values("RateLimit-Policy"))
	if !ok {
		return
	}
	s.lim = rate.NewLimiter(rate.Limit(float64(q)/w.Seconds()), int(q))
	// Start where the counter is: it has Remaining left after this check.
	s.lim.AllowN(now, int(max(q-a.Remaining, 0)))
}

// slowestPolicy is the limit of a RateLimit-Policy field with the lowest
// rate: its quota q per window w.
func slowestPolicy(values []string) (int64, time.Duration, bool) {
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		return 0, 0, false
	}
	var bestQ int64
	var bestW time.Duration
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			continue
		}
		qv, okq := it.Params.Get("q")
		wv, okw := it.Params.Get("w")
		q, ok1 := qv.(int64)
		ws, ok2 := wv.(int64)
		if !okq || !okw || !ok1 || !ok2 || q <= 0 || ws <= 0 {
			continue
		}
		w := time.Duration(ws) * time.Second
		if bestQ == 0 || float64(q)/w.Seconds() < float64(bestQ)/bestW.Seconds() {
			bestQ, bestW = q, w
		}
	}
	return bestQ, bestW, bestQ > 0
}
