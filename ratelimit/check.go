package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/deadline"
)

// Checker decides rate-limit checks on a core store. A check is bounded by COUNTER_READ_TIMEOUT, like a read: it sits on its
// caller's critical path. When Redis cannot decide in time the check fails
// open (admitted, degraded), counted and logged at most once a second.
type Checker struct {
	Log      *slog.Logger
	Store    *core.Store
	Policies map[string]*Policy // the named ones (LoadPolicies)
	Timeout  time.Duration      // the deadline of a check (COUNTER_READ_TIMEOUT)
	// Observe counts each check's outcome: allowed, refused, shadowed,
	// degraded or peeked.
	Observe  func(policy, outcome string)
	sometime rate.Sometimes
}

// Check resolves and decides every check, all validated before any is
// decided; the error is a bad check (400), nothing consumed. batch names
// the fields of errors checks[i].
func (l *Checker) Check(ctx context.Context, reqs []counting.LimitRequest, batch bool) ([]*Policy, []counting.LimitAnswer, error) {
	pols := make([]*Policy, len(reqs))
	items := make([]counting.Item, len(reqs))
	for i := range reqs {
		field := ""
		if batch {
			field = fmt.Sprintf("checks[%d].", i)
		}
		var err error
		if pols[i], items[i], err = Resolve(l.Policies, l.Store.Limits(), &reqs[i], field); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := deadline.Within(ctx, l.Timeout)
	defer cancel()
	res := l.Store.WriteOrSkip(ctx, items)
	out := make([]counting.LimitAnswer, len(res))
	for i, r := range res {
		a := &out[i]
		outcome := "allowed"
		switch {
		case r.Code != 0:
			*a = counting.LimitAnswer{Allowed: true, Degraded: true, Code: r.Code, Msg: r.Msg}
			outcome = "degraded"
			l.sometime.Do(func() {
				l.Log.WarnContext(ctx, "rate-limit check failed open", "policy", pols[i].name, "code", r.Code, "err", r.Msg)
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
		l.Observe(pols[i].name, outcome)
	}
	return pols, out, nil
}
