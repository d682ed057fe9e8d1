// Package deadline bounds many short calls with one timer. context.WithTimeout
// starts a runtime timer for each call and stops it when the call returns,
// and registers the call with its parent's cancellation: on the counter's
// cold read that was about 5% of its CPU. A Shared hands every call whose
// deadline falls in one tick (a sixteenth of the timeout) the same context,
// whose deadline is the start of that tick: one timer per tick, whatever
// the rate of calls, and a deadline never later than the one asked for and
// at most a tick earlier.
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
	cur           atomic.Pointer[tickContext]
	mu            sync.Mutex // held while a tick's context is made
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
// context.WithTimeout.
func (s *Shared) Within(parent context.Context) (context.Context, context.CancelFunc) {
	want := time.Now().Add(s.timeout)
	if d, ok := parent.Deadline(); (ok && !want.Before(d)) || parent.Err() != nil {
		return context.WithDeadline(parent, want)
	}
	ns := want.UnixNano()
	n := ns / int64(s.tick)
	if c := s.cur.Load(); c != nil && c.n == n {
		return c.ctx, noCancel
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur.Load(); c != nil && c.n == n {
		return c.ctx, noCancel // made meanwhile
	}
	// The tick's start: want less what it is past the tick's start on the
	// wall clock, keeping want's monotonic reading, so that a step of the
	// wall clock cannot stretch the deadline. The context ends at it by
	// itself; its cancel would only stop its timer early, which no caller
	// may do for the others.
	ctx, stop := context.WithDeadline(context.Background(), want.Add(-time.Duration(ns%int64(s.tick))))
	s.cur.Store(&tickContext{n: n, ctx: ctx, stop: stop})
	return ctx, noCancel
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
