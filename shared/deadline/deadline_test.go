package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestASharedContextEndsWithinATickOfTheTimeout: never later than the
// timeout from the call, at most a tick earlier, and done at its deadline.
func TestASharedContextEndsWithinATickOfTheTimeout(t *testing.T) {
	s := NewShared(80 * time.Millisecond) // a tick of 5 ms
	before := time.Now()
	ctx, cancel := s.Within(context.Background())
	defer cancel()
	after := time.Now()
	d, ok := ctx.Deadline()
	if !ok || d.After(after.Add(80*time.Millisecond)) || d.Before(before.Add(75*time.Millisecond)) {
		t.Fatalf("deadline %v after the call, want 75-80 ms", d.Sub(before))
	}
	if ctx.Err() != nil {
		t.Fatalf("done at once: %v", ctx.Err())
	}
	<-ctx.Done()
	if time.Now().Before(d) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("done %v before its deadline, with %v", d.Sub(time.Now()), ctx.Err())
	}
}

// TestCallsOfOneTickShareAContext: a thousand calls within a few
// milliseconds get one context per tick (a tick here is 62.5 ms), not one
// each; cancelling one changes nothing for the others.
func TestCallsOfOneTickShareAContext(t *testing.T) {
	s := NewShared(time.Second)
	seen := map[<-chan struct{}]bool{} // a tick's context is known by its channel
	start := time.Now()
	for range 1000 {
		ctx, cancel := s.Within(context.Background())
		cancel()
		if ctx.Err() != nil {
			t.Fatal("a cancel ended a shared context")
		}
		seen[ctx.Done()] = true
	}
	if most := ticksSpanned(time.Since(start), time.Second/16); len(seen) > most {
		t.Errorf("%d contexts for 1,000 calls in %d ticks at most", len(seen), most)
	}
}

// TestAnEarlierParentDeadlineWins: a caller whose own deadline comes first
// gets a context that ends then, and that its parent's cancellation ends.
func TestAnEarlierParentDeadlineWins(t *testing.T) {
	s := NewShared(time.Second)
	parent, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	ctx, cancel := s.Within(parent)
	defer cancel()
	want, _ := parent.Deadline()
	if d, _ := ctx.Deadline(); !d.Equal(want) {
		t.Fatalf("deadline %v, want the parent's %v", d, want)
	}
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ended with %v", ctx.Err())
	}

	gone, end := context.WithCancel(context.Background())
	end()
	if ctx, cancel := s.Within(gone); ctx.Err() == nil {
		t.Error("the context of a cancelled parent is not done")
	} else {
		cancel()
	}
}

// TestAHandoffStraddlesTheDeadline: a call's context ends at its deadline
// or up to a tick before it, its hand-off's at it or up to a tick after
// it, and the calls of one tick share both (the ring keeps neighbouring
// ticks apart).
func TestAHandoffStraddlesTheDeadline(t *testing.T) {
	s := NewShared(80 * time.Millisecond) // a tick of 5 ms
	before := time.Now()
	ctx, cancel := s.Within(context.Background())
	defer cancel()
	due := ctx.(*tickBound).due
	if due.Before(before.Add(80*time.Millisecond)) || due.After(time.Now().Add(80*time.Millisecond)) {
		t.Fatalf("due %v after the call, want the timeout", due.Sub(before))
	}
	e, _ := ctx.Deadline()
	l, _ := Handoff(ctx).Deadline()
	if e.After(due) || e.Before(due.Add(-5*time.Millisecond)) || !l.After(due) || l.After(due.Add(5*time.Millisecond)) {
		t.Fatalf("the call's %v and its hand-off's %v of due, want -5..0 ms and 0..5 ms", e.Sub(due), l.Sub(due))
	}
	calls, handoffs := map[<-chan struct{}]bool{}, map[<-chan struct{}]bool{}
	start := time.Now()
	for range 1000 {
		ctx, cancel := s.Within(context.Background())
		cancel()
		calls[ctx.Done()], handoffs[Handoff(ctx).Done()] = true, true
	}
	if most := ticksSpanned(time.Since(start), 5*time.Millisecond); len(calls) > most || len(handoffs) > most {
		t.Errorf("%d contexts and %d hand-off contexts for 1,000 calls in %d ticks at most", len(calls), len(handoffs), most)
	}
}

// TestWaitKeepsTheDeadlineToTheInstant: an answer that comes after the
// call's context ended (its tick's start) but before its deadline is taken;
// none at all ends the wait at the deadline, not at the tick's start.
func TestWaitKeepsTheDeadlineToTheInstant(t *testing.T) {
	s := NewShared(1600 * time.Millisecond) // a tick of 100 ms
	ctx := lateInTick(s)
	done := make(chan int, 1)
	go func() {
		<-ctx.Done()
		done <- 7
	}()
	if v, ok, err := Wait(done, ctx); !ok || v != 7 || err != nil || Passed(ctx) {
		t.Fatalf("an answer between the tick's start and the deadline: %d %v %v, passed %v", v, ok, err, Passed(ctx))
	}

	ctx, _ = s.Within(context.Background())
	due := ctx.(*tickBound).due
	if _, ok, err := Wait(make(chan int), ctx); ok || !errors.Is(err, context.DeadlineExceeded) || time.Now().Before(due) || !Passed(ctx) {
		t.Fatalf("no answer: ok %v, %v, %v before the deadline", ok, err, time.Until(due))
	}
}

// TestWaitEndsWhenAnEarlierParentIsCancelled: a caller with a deadline of
// its own, earlier, gets a context of its own, handed off as it is, and its
// cancellation ends the wait at once.
func TestWaitEndsWhenAnEarlierParentIsCancelled(t *testing.T) {
	s := NewShared(time.Minute)
	parent, stop := context.WithTimeout(context.Background(), 10*time.Second)
	ctx, cancel := s.Within(parent)
	defer cancel()
	if Handoff(ctx) != ctx {
		t.Fatal("a context of its own is handed off as another")
	}
	stop()
	start := time.Now()
	if _, ok, err := Wait(make(chan int), ctx); ok || !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("wait of a cancelled parent: ok %v, %v after %s", ok, err, time.Since(start))
	}
}

// BenchmarkWithin: a read's bounding context as the store makes it, against
// context.WithTimeout's, from a cancellable parent (an HTTP request's).
func BenchmarkWithin(b *testing.B) {
	parent, stop := context.WithCancel(context.Background())
	defer stop()
	use := func(ctx context.Context) {
		select {
		case <-ctx.Done():
			b.Fatal("done at once")
		default:
		}
	}
	b.Run("context.WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(parent, 5*time.Millisecond)
			use(ctx)
			cancel()
		}
	})
	b.Run("Shared", func(b *testing.B) {
		s := NewShared(5 * time.Millisecond)
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := s.Within(parent)
			use(ctx)
			cancel()
		}
	})
	// Within, Handoff and Wait, as the store's reads and writes use them,
	// for an answer that is there before the tick ends (almost every one).
	b.Run("Handoff", func(b *testing.B) {
		s := NewShared(5 * time.Millisecond)
		done := make(chan int, 1)
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := s.Within(parent)
			use(Handoff(ctx))
			done <- 1
			if _, ok, _ := Wait(done, ctx); !ok {
				b.Fatal("no answer")
			}
			cancel()
		}
	})
}

// TestSendKeepsTheDeadlineToTheInstant: a send that no one takes ends at
// the deadline asked for, not at its tick's start; one taken between the
// two is sent.
func TestSendKeepsTheDeadlineToTheInstant(t *testing.T) {
	s := NewShared(1600 * time.Millisecond) // a tick of 100 ms
	ctx := lateInTick(s)
	ch := make(chan int)
	got := make(chan int, 1)
	go func() {
		<-ctx.Done()
		got <- <-ch
	}()
	if err := Send(ch, 7, ctx); err != nil || <-got != 7 {
		t.Fatalf("a send taken between the tick's start and the deadline: %v", err)
	}

	ctx, _ = s.Within(context.Background())
	due := ctx.(*tickBound).due
	if err := Send(make(chan int), 7, ctx); !errors.Is(err, context.DeadlineExceeded) || time.Now().Before(due) {
		t.Fatalf("a send no one takes: %v, %v before the deadline", err, time.Until(due))
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Send(make(chan int), 7, cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context's send: %v", err)
	}
}

// ticksSpanned is the most ticks of length tick that calls made over
// took can fall in: one more than whole ticks fit in it, and one for
// rounding. A machine that pauses the loop lets it span more.
func ticksSpanned(took, tick time.Duration) int { return int(took/tick) + 2 }

// lateInTick is a call of s whose deadline falls late enough in its tick
// (80 ms or more after the tick's start, of a 100 ms tick) to leave room
// between the two: room enough for a goroutine woken at the tick's start
// to act before the deadline on a loaded machine.
func lateInTick(s *Shared) context.Context {
	for {
		ctx, _ := s.Within(context.Background())
		if e, _ := ctx.Deadline(); ctx.(*tickBound).due.Sub(e) >= 80*time.Millisecond {
			return ctx
		}
	}
}
