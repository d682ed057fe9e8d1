package main

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// limit is one check of a single-limit item against st.
func limit(t *testing.T, st *core.Store, key string, s counting.Spec, cost int64) counting.Result {
	t.Helper()
	it := counting.Item{Scope: counting.Scope{Policy: "test"}, Subject: counting.Subject{ID: key}, Spec: s, Hits: cost}
	r := st.Write(context.Background(), []counting.Item{it})[0]
	if r.Code != 0 {
		t.Fatalf("check %+v: %+v", it, r)
	}
	return r
}

func TestFixedWindowAdmitsTwiceTheLimitAcrossAnEdge(t *testing.T) {
	srv := redistest.Start(t)
	edge := time.Date(2026, 12, 3, 10, 1, 0, 0, time.UTC)
	clk := newClock(edge.Add(-100 * time.Millisecond))
	v, _ := testStore(t, srv, clk)
	s := counting.Spec{Kind: counting.FixedWindow, Limit: 3, PeriodMs: 60_000}
	admitted := 0
	for range 3 {
		if limit(t, v.Store, "edge", s, 1).Allowed {
			admitted++
		}
	}
	if r := limit(t, v.Store, "edge", s, 1); r.Allowed || r.RetryAfterMs != 100 {
		t.Fatalf("a 4th hit in the window: %+v, want refused until the edge, 100 ms", r)
	}
	clk.Set(edge)
	for range 3 {
		if limit(t, v.Store, "edge", s, 1).Allowed {
			admitted++
		}
	}
	// The fixed window's boundary burst: 2N within 100 ms, documented behaviour.
	if admitted != 6 {
		t.Fatalf("admitted %d across the edge, want 6 (2 x limit)", admitted)
	}
	if r := limit(t, v.Store, "edge", s, 0); r.Remaining != 0 || r.ResetAfterMs != 60_000 {
		t.Fatalf("peek after the edge: %+v", r)
	}
}

func TestFixedWindowOfADayIsTheNaturalDay(t *testing.T) {
	srv := redistest.Start(t)
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-11-01 is 25 hours long in New York (DST ends).
	clk := newClock(time.Date(2026, 11, 1, 0, 30, 0, 0, loc))
	v, _ := testStore(t, srv, clk, "COUNTER_TIMEZONE=America/New_York")
	s := counting.Spec{Kind: counting.FixedWindow, Limit: 2, PeriodMs: 24 * 3600 * 1000}
	r := limit(t, v.Store, "day", s, 2)
	wantReset := time.Date(2026, 11, 2, 0, 0, 0, 0, loc).Sub(clk.Now()).Milliseconds()
	if !r.Allowed || r.ResetAfterMs != wantReset || wantReset != 24*3600*1000+30*60*1000 {
		t.Fatalf("first check of the day: %+v, want reset %d ms (23.5 h of a 25 h day)", r, wantReset)
	}
	clk.Set(time.Date(2026, 11, 1, 23, 59, 59, 0, loc))
	if r := limit(t, v.Store, "day", s, 1); r.Allowed || r.RetryAfterMs != 1000 {
		t.Fatalf("late on the same day: %+v, want refused for 1 s", r)
	}
	clk.Set(time.Date(2026, 11, 2, 0, 0, 0, 0, loc))
	if r := limit(t, v.Store, "day", s, 1); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("next day: %+v", r)
	}
}

// TestRefusedHitsNeverConsume: for every kind, a storm of refused hits
// leaves the limiter exactly where it was.
func TestRefusedHitsNeverConsume(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	for _, k := range limiterKinds {
		t.Run(string(k), func(t *testing.T) {
			s := counting.Spec{Kind: k, Limit: 5, PeriodMs: 10_000}
			key := "storm-" + string(k)
			refused := limit(t, v.Store, key, s, 1)
			for refused.Allowed {
				refused = limit(t, v.Store, key, s, 1)
			}
			before := limit(t, v.Store, key, s, 0)
			for range 50 {
				if r := limit(t, v.Store, key, s, 1); r.Allowed {
					t.Fatalf("admitted after a refusal: %+v", r)
				}
			}
			if after := limit(t, v.Store, key, s, 0); !reflect.DeepEqual(after, before) {
				t.Fatalf("50 refused hits changed the limiter:\n before %+v\n after  %+v", before, after)
			}
			clk.Add(time.Duration(refused.RetryAfterMs) * time.Millisecond)
			if r := limit(t, v.Store, key, s, 1); !r.Allowed {
				t.Fatalf("refused at the retry-after the refusal gave: %+v (refusal %+v)", r, refused)
			}
		})
	}
}

func TestShadowModeAllowsAndReports(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	s := counting.Spec{Kind: counting.SlidingLog, Limit: 2, PeriodMs: 60_000, Shadow: true}
	for i := range 5 {
		r := limit(t, v.Store, "shadow", s, 1)
		if !r.Allowed || r.Shadowed != (i >= 2) {
			t.Fatalf("hit %d in shadow mode: %+v", i, r)
		}
		if i >= 2 && (r.Reason != counting.OverLimit || r.RetryAfterMs != 60_000) {
			t.Fatalf("hit %d does not report what enforcing would do: %+v", i, r)
		}
	}
	s.Shadow = false
	if r := limit(t, v.Store, "shadow", s, 0); r.Remaining != 0 {
		t.Fatalf("shadowed hits consumed: %+v", r)
	}
	if n := rawInt(t, newClient(t, srv.URL()), "ZCARD", "rl:{p:test:shadow}:sliding_log:2:60000"); n != 2 {
		t.Fatalf("the log holds %d events, want the 2 admitted", n)
	}
}

func TestLeakyBucketQueuesWithDelays(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	// 10 per second leave, 3 may wait.
	s := counting.Spec{Kind: counting.LeakyBucket, Limit: 10, PeriodMs: 1000, Capacity: 3}
	for i, want := range []int64{0, 100, 200} {
		if r := limit(t, v.Store, "q", s, 1); !r.Allowed || r.DelayMs != want || r.Remaining != 2-int64(i) {
			t.Fatalf("hit %d: %+v, want admitted with delay %d ms", i, r, want)
		}
	}
	if r := limit(t, v.Store, "q", s, 1); r.Allowed || r.RetryAfterMs != 100 || r.ResetAfterMs != 300 {
		t.Fatalf("a full queue: %+v, want refused, retry in 100 ms", r)
	}
	clk.Add(250 * time.Millisecond)
	if r := limit(t, v.Store, "q", s, 2); !r.Allowed || r.DelayMs != 50 {
		t.Fatalf("after 250 ms: %+v, want admitted behind the unit still queued (50 ms)", r)
	}
}

func TestTokenBucketNextCallerPaysForALargeTake(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	// 1 permit per second, 1 stored at most; the new bucket is full.
	s := counting.Spec{Kind: counting.TokenBucket, Limit: 1, PeriodMs: 1000, Acquire: true}
	if r := limit(t, v.Store, "guava", s, 5); !r.Allowed || r.DelayMs != 0 {
		t.Fatalf("acquire(5) on a full bucket: %+v, want no wait (the next caller pays)", r)
	}
	if r := limit(t, v.Store, "guava", s, 1); !r.Allowed || r.DelayMs != 4000 {
		t.Fatalf("the next acquire(1): %+v, want a wait of 4 s", r)
	}
	s.Acquire = false
	if r := limit(t, v.Store, "guava", s, 1); r.Allowed || r.RetryAfterMs != 5000 {
		t.Fatalf("tryAcquire during the waits: %+v, want refused for 5 s", r)
	}
	clk.Add(5 * time.Second)
	if r := limit(t, v.Store, "guava", s, 1); !r.Allowed || r.DelayMs != 0 {
		t.Fatalf("tryAcquire after the waits: %+v", r)
	}
}

func TestGCRAAnswersLikeRedisCell(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	// 10 per minute, 5 at once (CL.THROTTLE key 4 10 60: max_burst 4 admits 5).
	s := counting.Spec{Kind: counting.GCRA, Limit: 10, PeriodMs: 60_000, Burst: 5}
	for i := range 5 {
		if r := limit(t, v.Store, "cell", s, 1); !r.Allowed || r.Remaining != 4-int64(i) || r.ResetAfterMs != 6000*int64(i+1) {
			t.Fatalf("hit %d: %+v", i, r)
		}
	}
	if r := limit(t, v.Store, "cell", s, 1); r.Allowed || r.RetryAfterMs != 6000 || r.ResetAfterMs != 30_000 {
		t.Fatalf("past the burst: %+v, want retry in one emission interval (6 s)", r)
	}
	if r := limit(t, v.Store, "cell", s, 6); r.Allowed || r.RetryAfterMs != -1 {
		t.Fatalf("a cost above the burst: %+v, want never (-1)", r)
	}
}

// TestSlidingWindowErrorAgainstTheLog runs a stream of hits through the
// sliding window counter and measures how far the approximation strays
// from the exact log (what a sliding log would decide on the same
// history): on a random stream, and on the worst case (the previous
// window's hits all at its very end).
func TestSlidingWindowErrorAgainstTheLog(t *testing.T) {
	srv := redistest.Start(t)
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clk := newClock(start)
	v, _ := testStore(t, srv, clk)
	const lim, period = 100, 10_000
	win := counting.Spec{Kind: counting.SlidingWindow, Limit: lim, PeriodMs: period}

	// Random stream: about 3 times the limit offered, in bursts.
	rng := rand.New(rand.NewPCG(3, 3))
	var admitted []int64 // admission times of the window counter
	var calls, tooMany, tooFew int
	for clk.Now().Sub(start) < 5*time.Minute {
		clk.Add(time.Duration(rng.ExpFloat64()*period/(3*lim)) * time.Millisecond)
		now := clk.Now().UnixMilli()
		exact := countSince(admitted, now-period) < lim
		w := limit(t, v.Store, "rw", win, 1)
		calls++
		switch {
		case w.Allowed && !exact:
			tooMany++
		case !w.Allowed && exact:
			tooFew++
		}
		if w.Allowed {
			admitted = append(admitted, now)
		}
	}
	over := maxInAnyPeriod(admitted, period)
	t.Logf("random stream of %d hits at 3x the limit: %d admitted that the log would refuse (%.2f%%), %d refused that it would admit (%.2f%%); at most %d admitted in one sliding period (limit %d)",
		calls, tooMany, 100*float64(tooMany)/float64(calls), tooFew, 100*float64(tooFew)/float64(calls), over, lim)
	if over > 2*lim || tooMany == 0 && tooFew == 0 {
		t.Fatalf("admitted %d in one period with %d+%d differences: not the approximation's behaviour", over, tooMany, tooFew)
	}

	// Worst case: the limit spent at the very end of a window, then a
	// steady stream through the next one.
	clk.Set(time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC).Add(-time.Millisecond))
	admitted = admitted[:0]
	for range lim {
		if limit(t, v.Store, "ww", win, 1).Allowed {
			admitted = append(admitted, clk.Now().UnixMilli())
		}
	}
	for range period / 10 {
		clk.Add(10 * time.Millisecond)
		if limit(t, v.Store, "ww", win, 1).Allowed {
			admitted = append(admitted, clk.Now().UnixMilli())
		}
	}
	worst := maxInAnyPeriod(admitted, period)
	t.Logf("worst case: %d admitted in one sliding period of limit %d (%.2fx)", worst, lim, float64(worst)/lim)
	if worst <= lim || worst > 2*lim {
		t.Fatalf("worst case admitted %d in one period: the approximation's known error is above the limit and at most twice it", worst)
	}
}

// countSince is how many admission times are after since.
func countSince(at []int64, since int64) int {
	n := 0
	for _, a := range at {
		if a > since {
			n++
		}
	}
	return n
}

// maxInAnyPeriod is the most admission times within any period ms.
func maxInAnyPeriod(at []int64, period int64) int {
	best, j := 0, 0
	for i := range at {
		for at[i]-at[j] >= period {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func TestLimiterKeysShareTheKeysHashTag(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	it := counting.Item{Scope: counting.Scope{Policy: "api"}, Subject: counting.Subject{ID: "user:1}{x"}, Hits: 1}
	it.Spec = counting.Spec{Kind: counting.FixedWindow, Limit: 10, PeriodMs: 1000}
	for _, k := range limiterKinds[1:] {
		it.Spec.Also = append(it.Spec.Also, counting.Spec{Kind: k, Limit: 10, PeriodMs: 1000})
	}
	if r := v.Store.Write(context.Background(), []counting.Item{it})[0]; r.Code != 0 || !r.Allowed || len(r.Limits) != 6 {
		t.Fatalf("six limits on one key: %+v", r)
	}
	keys := srv.Keys(t, "rl:*")
	if len(keys) != 6 {
		t.Fatalf("keys %v, want one per limit", keys)
	}
	for _, k := range keys {
		if tag := hashTag(k); tag != "{p:api:user%3A1%7D%7Bx}" {
			t.Errorf("key %s has hash tag %q", k, tag)
		}
	}
}

// TestLimiterChecksLoadTheLibrary: checks and views call limit.lua's
// function of the library; after FUNCTION FLUSH (a restart without
// persistence) the first of each loads the library and is answered as if
// it had been there, and the next ones find it.
func TestLimiterChecksLoadTheLibrary(t *testing.T) {
	srv := redistest.Start(t)
	v, _ := testStore(t, srv, newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)))
	s := counting.Spec{Kind: counting.GCRA, Limit: 2, PeriodMs: 60_000, Burst: 1}
	srv.OnMasters(t, "FUNCTION", "FLUSH")
	if r := limit(t, v.Store, "flushed", s, 1); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("first check after FUNCTION FLUSH: %+v, want admitted, 0 remaining", r)
	}
	if r := limit(t, v.Store, "flushed", s, 1); r.Allowed || r.RetryAfterMs != 30_000 {
		t.Fatalf("second check: %+v, want refused for 30 s", r)
	}
	srv.OnMasters(t, "FUNCTION", "FLUSH")
	it := counting.Item{Scope: counting.Scope{Policy: "test"}, Subject: counting.Subject{ID: "viewer"}, Spec: s, Hits: 1}
	for i, want := range []int64{1, 1} {
		r, total, err := v.Store.View(context.Background(), it, "article", "total:{article}")
		if err != nil || r.Allowed != (i == 0) || total != want {
			t.Fatalf("view %d after FUNCTION FLUSH: %+v, total %d, %v; want allowed %v, total %d", i, r, total, err, i == 0, want)
		}
	}
	if n := srv.TotalCalls(t, "function|load"); n != 2*int64(len(srv.Calls(t, "fcall"))) {
		t.Errorf("%d FUNCTION LOAD, want one per master after each flush", n)
	}
}
