// Package deadline bounds many short calls with one timer. context.WithTimeout
// starts a runtime timer for each call and stops it when the call returns,
// and registers the call with its parent's cancellation: on the counter's
// cold read that was about 5% of its CPU. A Shared hands every call whose
// deadline falls in one tick (a sixteenth of the timeout) a context that
// ends with the same timer: one timer per tick, whatever the rate of calls.
//
// The context Within returns ends at the start of the call's tick: never
// later than the deadline asked for, and at most a tick earlier. A call
// handed to another goroutine is kept to its deadline to the instant: the
// goroutine is given Handoff(ctx), which ends at the start of the next
// tick (never earlier), and the caller waits for it with Wait, on ctx and
// then, for what is left, on a timer of its own, which only the calls still
// running in their last tick start.
//
// What a Shared context does not carry over from the caller's: its values
// and its cancellation before its deadline (a caller gone away). It is for
// calls that are short and bounded by the timeout anyway (a Redis read or
// write); a caller whose own deadline comes first gets a context of its own,
// as context.WithDeadline makes it.
package deadline

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Shared hands out contexts that end a timeout from now, shared by the
// calls of one tick.
type Shared struct {
	timeout, tick time.Duration
	// ticks holds the contexts of the latest ticks asked for, tick n's in
	// ticks[n%len]: a call and its hand-off ask for two neighbours.
	ticks [4]atomic.Pointer[tickContext]
	mu    sync.Mutex // held while a tick's context is made
}

// tickContext is one tick's context.
type tickContext struct {
	n    int64 // the tick's number: its start in unix ns / the tick
	ctx  context.Context
	stop context.CancelFunc // never called: ctx ends at its deadline
}

// minTick bounds how many timers a Shared starts: at most one per tick.
const minTick = 50 * time.Microsecond

// NewShared returns a Shared for timeout (> 0).
func NewShared(timeout time.Duration) *Shared {
	return &Shared{timeout: timeout, tick: max(timeout/16, minTick)}
}

// Within returns a context that ends at the timeout from now, or up to a
// tick before it, or at parent's deadline when that comes first (then a
// context of its own, derived from parent). cancel releases a context of
// its own and does nothing to a shared one; call it as with
// context.WithTimeout. Handoff and Wait keep a call handed to another
// goroutine to the timeout to the instant.
func (s *Shared) Within(parent context.Context) (context.Context, context.CancelFunc) {
	due := time.Now().Add(s.timeout)
	if d, ok := parent.Deadline(); (ok && !due.Before(d)) || parent.Err() != nil {
		return context.WithDeadline(parent, due)
	}
	return &tickBound{Context: s.at(due, 0), s: s, due: due}, noCancel
}

// tickBound is a shared tick's context, given to one call: it ends with
// the tick, and knows the call's own deadline, due.
type tickBound struct {
	context.Context // the tick's: ends at due or up to a tick before it
	s               *Shared
	due             time.Time
}

// Handoff is the context to give the goroutine that runs a call made with
// ctx for its caller, who waits for it with Wait: for a context of Within,
// one that ends at its deadline or up to a tick after it (shared); for any
// other, ctx itself.
func Handoff(ctx context.Context) context.Context {
	if b, ok := ctx.(*tickBound); ok {
		return b.s.at(b.due, 1)
	}
	return ctx
}

// Wait waits for done until ctx's deadline: for a context of Within, on
// ctx and then, when it ended before the deadline asked for, on a timer for
// what is left; for any other, until ctx is done. ok is false when the
// deadline passed first, or ctx was cancelled (err says which).
func Wait[T any](done <-chan T, ctx context.Context) (v T, ok bool, err error) {
	select {
	case v = <-done:
		return v, true, nil
	case <-ctx.Done():
	}
	left, stop, err := rest(ctx)
	if left == nil {
		return v, false, err
	}
	defer stop()
	select {
	case v = <-done:
		return v, true, nil
	case <-left:
		return v, false, err
	}
}

// Send sends v on ch until ctx's deadline, as Wait waits: nil once sent,
// else why not.
func Send[T any](ch chan<- T, v T, ctx context.Context) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
	}
	left, stop, err := rest(ctx)
	if left == nil {
		return err
	}
	defer stop()
	select {
	case ch <- v:
		return nil
	case <-left:
		return err
	}
}

// rest is, once ctx is done, what is left of its call's deadline: for a
// context of Within that ended at its tick's start, a timer for the rest
// (stop releases it); otherwise none, and err is why ctx ended.
func rest(ctx context.Context) (left <-chan time.Time, stop func(), err error) {
	b, shared := ctx.(*tickBound)
	if !shared {
		return nil, nil, ctx.Err()
	}
	d := time.Until(b.due)
	if d <= 0 {
		return nil, nil, context.DeadlineExceeded
	}
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }, context.DeadlineExceeded
}

// Passed reports whether ctx's deadline has passed: for a context of
// Within, the deadline asked for, not its tick's start.
func Passed(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	b, shared := ctx.(*tickBound)
	return !shared || !time.Now().Before(b.due)
}

// at is the shared context of the tick want falls in (next 0), or of the
// one after it (next 1): it ends at that tick's start.
func (s *Shared) at(want time.Time, next int64) context.Context {
	ns := want.UnixNano()
	n := ns/int64(s.tick) + next
	slot := &s.ticks[n%int64(len(s.ticks))]
	if c := slot.Load(); c != nil && c.n == n {
		return c.ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := slot.Load(); c != nil && c.n == n {
		return c.ctx // made meanwhile
	}
	// The tick's start: want moved by its distance to that start on the
	// wall clock, keeping want's monotonic reading, so that a step of the
	// wall clock cannot stretch the deadline. The context ends at it by
	// itself; its cancel would only stop its timer early, which no caller
	// may do for the others.
	ctx, stop := context.WithDeadline(context.Background(), want.Add(time.Duration(n*int64(s.tick)-ns)))
	slot.Store(&tickContext{n: n, ctx: ctx, stop: stop})
	return ctx
}

func noCancel() {}

// shared holds a Shared per timeout that Within was asked for: a process
// uses a handful (the read timeout, the write timeout, ...). Within is for
// configured timeouts, never one computed per call.
var shared sync.Map // time.Duration -> *Shared

// Within is context.WithTimeout(parent, timeout) through the process's
// Shared for timeout (see Shared.Within): for the calls of a hot path.
func Within(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	s, ok := shared.Load(timeout)
	if !ok {
		s, _ = shared.LoadOrStore(timeout, NewShared(timeout))
	}
	return s.(*Shared).Within(parent)
}
