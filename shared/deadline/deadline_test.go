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
	seen := map[context.Context]bool{}
	for range 1000 {
		ctx, cancel := s.Within(context.Background())
		cancel()
		if ctx.Err() != nil {
			t.Fatal("a cancel ended a shared context")
		}
		seen[ctx] = true
	}
	if len(seen) > 2 {
		t.Errorf("%d contexts for 1,000 calls in one or two ticks", len(seen))
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
}
