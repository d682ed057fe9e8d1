package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

func mustIncr(t testing.TB, st campaignStore, q Query) Result {
	t.Helper()
	res, err := st.Incr(context.Background(), &q)
	if err != nil {
		t.Fatalf("incr %+v: %v", q, err)
	}
	return res
}

func TestIncrWritesDayAndHourKeys(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC))
	// The hour hash keeps the largest window the counter serves, whatever
	// window the writer counts for: 3 h here.
	st, _ := testStore(t, srv, clk, "COUNTER_MAX_WINDOW_HOURS=3")
	rc := newClient(t, srv.URL())

	q := Query{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "abc"}, {Name: "bundle", ID: "com.foo"}}}
	for i := 1; i <= 3; i++ {
		res := mustIncr(t, st, q)
		for j, c := range res.Counts {
			if c.Day != int64(i) || c.Windows[0] != int64(i) {
				t.Fatalf("incr %d dim %d: got %+v, want day=window=%d", i, j, c, i)
			}
		}
	}
	hour := strconv.FormatInt(clk.Now().Unix()/3600, 10)
	for _, key := range []string{"freq:{win:device:42:abc}", "freq:{win:bundle:42:com.foo}"} {
		if got := rawInt(t, rc, "GET", key); got != 3 {
			t.Errorf("GET %s = %d, want 3", key, got)
		}
		ttl := rawInt(t, rc, "PTTL", key)
		if want := int64(13*time.Hour+30*time.Minute) / 1e6; ttl > want || ttl < want-5000 {
			t.Errorf("PTTL %s = %d ms, want about %d (end of day)", key, ttl, want)
		}
	}
	hkey := "hfreq:{win:device:42:abc}"
	if got := rawInt(t, rc, "HGET", hkey, hour); got != 3 {
		t.Errorf("HGET %s %s = %d, want 3", hkey, hour, got)
	}
	if ttl := rawInt(t, rc, "PTTL", hkey); ttl > 4*3600_000 || ttl < 4*3600_000-5000 {
		t.Errorf("PTTL %s = %d, want about 4 h (retention+1)", hkey, ttl)
	}
}

func TestIncrDayOnlyWritesNoHash(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)))
	rc := newClient(t, srv.URL())
	mustIncr(t, st, Query{CID: "7", Event: "imp", Dims: []Dim{{Name: "device", ID: "d"}}})
	if n := rawInt(t, rc, "EXISTS", "hfreq:{imp:device:7:d}"); n != 0 {
		t.Errorf("hour hash written for windowHours=0")
	}
	if n := rawInt(t, rc, "GET", "freq:{imp:device:7:d}"); n != 1 {
		t.Errorf("day counter = %d, want 1", n)
	}
}

func TestLastSecondOfDayStillCounts(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 23, 59, 59, 0, time.UTC))
	st, _ := testStore(t, srv, clk)
	rc := newClient(t, srv.URL())
	mustIncr(t, st, Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "late"}}})
	ttl := rawInt(t, rc, "PTTL", "freq:{win:device:1:late}")
	if ttl <= 0 || ttl > 1000 {
		t.Fatalf("PTTL at 23:59:59 = %d ms, want in (0, 1000]", ttl)
	}
	if got := st.Read(context.Background(), []Query{{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "late"}}}})[0]; got.Err != nil || got.Counts[0].Day != 1 {
		t.Fatalf("read after last-second write: %+v", got)
	}
	time.Sleep(time.Duration(ttl+50) * time.Millisecond)
	if n := rawInt(t, rc, "EXISTS", "freq:{win:device:1:late}"); n != 0 {
		t.Errorf("day key still exists after the day ended")
	}
}

func TestDSTDayTTLInRedis(t *testing.T) {
	srv := redistest.Start(t)
	ny, _ := time.LoadLocation("America/New_York")
	clk := newClock(time.Date(2026, 11, 1, 0, 30, 0, 0, ny))
	st, _ := testStore(t, srv, clk, "COUNTER_TIMEZONE=America/New_York")
	rc := newClient(t, srv.URL())
	mustIncr(t, st, Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "dst"}}})
	ttl := rawInt(t, rc, "PTTL", "freq:{win:device:1:dst}")
	want := int64(24*time.Hour+30*time.Minute) / 1e6 // 25 h day, 30 min gone
	if ttl > want || ttl < want-5000 {
		t.Errorf("PTTL on the 25 h day = %d ms, want about %d", ttl, want)
	}
}

func TestHourBucketsSlideAndStayBounded(t *testing.T) {
	srv := redistest.Start(t)
	start := time.Date(2026, 12, 1, 0, 10, 0, 0, time.UTC)
	clk := newClock(start)
	st, _ := testStore(t, srv, clk, "COUNTER_MAX_WINDOW_HOURS=3")
	rc := newClient(t, srv.URL())
	q := Query{CID: "9", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "h"}}}
	// Two events an hour for two days.
	for h := range 48 {
		clk.Set(start.Add(time.Duration(h) * time.Hour))
		mustIncr(t, st, q)
		res := mustIncr(t, st, q)
		wantWindow := int64(2 * min(h+1, 3))
		if res.Counts[0].Windows[0] != wantWindow {
			t.Fatalf("hour %d: window after incr = %d, want %d", h, res.Counts[0].Windows[0], wantWindow)
		}
		if n := rawInt(t, rc, "HLEN", "hfreq:{win:device:9:h}"); n > 4 {
			t.Fatalf("hour %d: hash has %d fields, want at most retention+1 = 4", h, n)
		}
	}
	// Reads: the window moves with the clock, one hour at a time.
	for ahead, want := range []int64{6, 4, 2, 0} {
		clk.Set(start.Add(time.Duration(47+ahead) * time.Hour))
		res := st.Read(context.Background(), []Query{q})[0]
		if res.Err != nil || res.Counts[0].Windows[0] != want {
			t.Errorf("%d h after the last write: window = %d (err %v), want %d", ahead, res.Counts[0].Windows[0], res.Err, want)
		}
	}
}

func TestEventIDIsIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)))
	q := Query{CID: "5", Event: "win", Windows: []int{2}, EID: "auction-1:imp-1", Dims: []Dim{{Name: "device", ID: "x"}, {Name: "tagid", ID: "t"}}}
	first := mustIncr(t, st, q)
	again := mustIncr(t, st, q)
	if first.Duplicate || !again.Duplicate {
		t.Fatalf("duplicate flags: first %v, replay %v; want false, true", first.Duplicate, again.Duplicate)
	}
	for j := range q.Dims {
		if again.Counts[j].Day != 1 || again.Counts[j].Windows[0] != 1 {
			t.Errorf("replay dim %d counts = %+v, want day=1 window=1", j, again.Counts[j])
		}
	}
	q.EID = "auction-2:imp-1"
	if res := mustIncr(t, st, q); res.Duplicate || res.Counts[0].Day != 2 {
		t.Errorf("new eid: %+v, want counted (day 2)", res)
	}
}

func TestCachedReadSeesOtherConnectionsWrites(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()))
	rc := newClient(t, srv.URL())
	q := []Query{{CID: "3", Event: "win", Dims: []Dim{{Name: "bundle", ID: "com.hot"}}}}
	read := func() int64 {
		res := st.Read(context.Background(), q)[0]
		if res.Err != nil {
			t.Fatalf("read: %v", res.Err)
		}
		return res.Counts[0].Day
	}
	if n := read(); n != 0 {
		t.Fatalf("fresh key = %d", n)
	}
	raw(t, rc, "SET", "freq:{win:bundle:3:com.hot}", "5")
	waitFor(t, 100*time.Millisecond, func() bool { return read() == 5 })
	before := testutilCount(st.m.cacheHits)
	if n := read(); n != 5 {
		t.Errorf("cached day = %d, want 5", n)
	}
	if testutilCount(st.m.cacheHits) <= before {
		t.Errorf("second read of an unchanged cached key was not a cache hit")
	}
	raw(t, rc, "INCR", "freq:{win:bundle:3:com.hot}")
	waitFor(t, 100*time.Millisecond, func() bool { return read() == 6 })
	// Hour buckets, which the local cache decodes once per answer.
	q[0].Windows = []int{3}
	window := func() int64 {
		res := st.Read(context.Background(), q)[0]
		if res.Err != nil {
			t.Fatalf("read: %v", res.Err)
		}
		return res.Counts[0].Windows[0]
	}
	hour := strconv.FormatInt(time.Now().Unix()/3600, 10)
	raw(t, rc, "HINCRBY", "hfreq:{win:bundle:3:com.hot}", hour, "4")
	waitFor(t, 100*time.Millisecond, func() bool { return window() == 4 })
	before = testutilCount(st.m.cacheHits)
	if n := window(); n != 4 {
		t.Errorf("cached hour buckets = %d, want 4", n)
	}
	if testutilCount(st.m.cacheHits) <= before {
		t.Errorf("second read of unchanged hour buckets was not a cache hit")
	}
	raw(t, rc, "HINCRBY", "hfreq:{win:bundle:3:com.hot}", hour, "1")
	waitFor(t, 100*time.Millisecond, func() bool { return window() == 5 })
}

func waitFor(t *testing.T, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReadFailsOpenWithinDeadline(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=20ms", "COUNTER_STALE_MAX=0") // zeros, not last-known values
	q := []Query{
		{CID: "1", Event: "win", Windows: []int{2}, Dims: []Dim{{Name: "device", ID: "a"}, {Name: "bundle", ID: "b"}}},
		{CID: "2", Event: "win", Dims: []Dim{{Name: "device", ID: "c"}}},
	}
	// Every item has an uncached dimension: a cached one may rightly still
	// be answered from the local cache in the instant before rueidis notices
	// the connection is gone.
	if _, err := st.Incr(context.Background(), &Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "a"}}}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, code int) {
		t.Helper()
		for range 5 {
			start := time.Now()
			res := st.Read(context.Background(), q)
			took := time.Since(start)
			// The margin absorbs a loaded CI machine; what must never
			// happen is waiting on rueidis's reconnect paths (about 1 s).
			if took > 20*time.Millisecond+100*time.Millisecond {
				t.Errorf("%s: read took %s, deadline 20ms", name, took)
			}
			for i, r := range res {
				if r.Err == nil {
					t.Fatalf("%s: item %d has no error", name, i)
				}
				if got := apierr.CodeOf(r.Err); got != code {
					t.Errorf("%s: item %d code %d (%v), want %d", name, i, got, r.Err, code)
				}
				for _, c := range r.Counts {
					if c.Day != 0 || slices.ContainsFunc(c.Windows, func(n int64) bool { return n != 0 }) {
						t.Fatalf("%s: item %d counts %+v, want zero", name, i, c)
					}
				}
			}
		}
	}
	recovered := func(name string, want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			res := st.Read(context.Background(), q)[0]
			if res.Err == nil && res.Counts[0].Day == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no recovery within 10s: %+v", name, res)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	srv.Pause()
	// A Redis that does not answer in time is a timeout; one that refuses
	// connections is unavailable.
	check("redis stopped (SIGSTOP)", apierr.Timeout)
	srv.Resume()
	recovered("after SIGCONT", 1)

	srv.Kill()
	check("redis killed", apierr.Unavailable)
	srv.Restart()
	recovered("after restart", 0)

	_, err := st.Incr(context.Background(), &Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "a"}}})
	if err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}

// A read that ran out of time leaves its items and results to the reader
// still answering it, which uses them when Redis answers at last; the
// reads after it, meanwhile and then, take their buffers from the reads
// that finished and answer their own counts. (core's
// TestReadIntoSaysWhoHoldsTheBuffers checks what the store says of them.)
func TestLateReadersKeepTheirBuffers(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=20ms", "COUNTER_STALE_MAX=0")
	const devices = 12
	device := func(i int) []Query {
		return []Query{{CID: "1", Event: "win", Windows: []int{2}, Dims: []Dim{{Name: "device", ID: "late-" + strconv.Itoa(i)}}}}
	}
	for i := range devices {
		for range i {
			mustIncr(t, st, device(i)[0])
		}
	}
	readAll := func(check func(i int, r Result)) {
		var wg sync.WaitGroup
		for i := range devices {
			wg.Go(func() { check(i, st.Read(context.Background(), device(i))[0]) })
		}
		wg.Wait()
	}
	// Five times: the pools hand buffers out per P, and under the race
	// detector drop some of what they are given back.
	for range 5 {
		srv.Pause()
		var late sync.Map
		readAll(func(i int, r Result) {
			if r.Err != nil {
				late.Store(i, true)
			}
		})
		// Redis still stopped: these take buffers (answered at once, the
		// store stalled), while the late readers wait on Redis with theirs.
		for range 5 {
			readAll(func(int, Result) {})
		}
		srv.Resume()
		n := 0
		late.Range(func(any, any) bool { n++; return true })
		if n == 0 {
			t.Fatal("no read ran out of time with Redis stopped")
		}
		deadline := time.Now().Add(10 * time.Second)
		var mu sync.Mutex
		for fresh := 0; fresh < 5*devices; {
			readAll(func(i int, r Result) {
				if r.Err != nil {
					return // the stall's answers, until a PING ends it
				}
				if r.Counts[0].Day != int64(i) || r.Counts[0].Windows[0] != int64(i) {
					t.Errorf("device %d read %+v, want %d", i, r.Counts[0], i)
				}
				mu.Lock()
				fresh++
				mu.Unlock()
			})
			if time.Now().After(deadline) {
				t.Fatalf("%d fresh reads within 10s", fresh)
			}
		}
	}
}

// An answering write names its window's fields from the current hour's
// string, a digit at a time (lua/days.lua): its sums are right across the
// hours whose last digits borrow (...0 back to ...9, ...00 back to ...99),
// for a window named field by field (3 hours) and for one of 24 over a
// hash that holds them all (a hot counter's).
func TestWindowSumsAcrossDigitBorrows(t *testing.T) {
	srv := redistest.Start(t)
	h0 := time.Now().Unix() / 3600 / 100 * 100 // an epoch hour ending in 00
	clk := newClock(time.Unix((h0-30)*3600+60, 0))
	st, _ := testStore(t, srv, clk)
	events := func(k int) int { return k%5 + 1 } // hour h0-30+k's: each hour's count its own
	for k := range 40 {                          // hours h0-30 .. h0+9
		for _, w := range []int{3, 24} {
			q := Query{CID: "1", Event: "win", Windows: []int{w}, Dims: []Dim{{Name: "bundle", ID: "b" + strconv.Itoa(w)}}}
			var got int64
			for range events(k) {
				got = mustIncr(t, st, q).Counts[0].Windows[0]
			}
			want := 0
			for j := max(0, k-w+1); j <= k; j++ {
				want += events(j)
			}
			if got != int64(want) {
				t.Errorf("hour h0%+d, %d h window: %d, want %d", k-30, w, got, want)
			}
		}
		clk.Add(time.Hour)
	}
}

func TestWriteFailsWhenRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()))
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := st.Incr(ctx, &Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "a"}}})
	if apierr.CodeOf(err) != apierr.Unavailable {
		t.Fatalf("incr with redis down: err = %v, want unavailable", err)
	}
}

// TestWriteBatchIsOnePipelineAndSurvivesFunctionFlush: a write batch
// calls the library's count function in one pipeline, one run per
// dimension (its day and its hour buckets together); after FUNCTION FLUSH
// (or a restart without persistence) Redis answers "Function not found",
// the store loads the library and the runs go again, in order.
func TestWriteBatchIsOnePipelineAndSurvivesFunctionFlush(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC))
	st, _ := testStore(t, srv, clk)
	rc := newClient(t, srv.URL())
	q := Query{CID: "7", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "abc"}, {Name: "bundle", ID: "com.foo"}}}
	mustIncr(t, st, q)
	srv.OnMasters(t, "FUNCTION", "FLUSH")
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	for i := 2; i <= 3; i++ {
		res := mustIncr(t, st, q)
		for j, c := range res.Counts {
			if c.Day != int64(i) || c.Windows[0] != int64(i) {
				t.Fatalf("incr %d dim %d after FUNCTION FLUSH: %+v", i, j, c)
			}
		}
	}
	// The first write after the flush: two calls that find no function,
	// the library loaded on every master, the two calls again; the second
	// write: two calls (on whichever masters serve the two dimensions'
	// slots).
	masters := len(srv.Calls(t, "fcall"))
	if fcall, load := srv.TotalCalls(t, "fcall"), srv.TotalCalls(t, "function|load"); fcall != 6 || load != int64(masters) {
		t.Errorf("after FUNCTION FLUSH: %d FCALL and %d FUNCTION LOAD, want 6 and one per master (%d)", fcall, load, masters)
	}
	if got := rawInt(t, rc, "GET", "freq:{win:device:7:abc}"); got != 3 {
		t.Errorf("day counter = %d, want 3", got)
	}
}

// A read Redis cannot serve in time answers each count's last-known value,
// stale with its age, while it is younger than COUNTER_STALE_MAX; a count
// never read, or read too long ago, is 0 and degraded as before. Writes
// never answer from it.
func TestReadsAnswerLastKnownValues(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Now())
	st, _ := testStore(t, srv, clk, "COUNTER_READ_TIMEOUT=20ms", "COUNTER_STALE_MAX=60s")
	ctx := context.Background()
	// Devices are read straight from Redis (bundles and tagids would be
	// answered by the client-side cache).
	known := Query{CID: "1", Event: "win", Windows: []int{2}, Dims: []Dim{{Name: "device", ID: "a"}}}
	unread := Query{CID: "2", Event: "win", Dims: []Dim{{Name: "device", ID: "a"}}}
	for range 3 {
		mustIncr(t, st, known)
	}
	if r := st.Read(ctx, []Query{known})[0]; r.Err != nil || r.Stale || r.Counts[0].Day != 3 {
		t.Fatalf("read with Redis up: %+v", r)
	}
	srv.Pause()
	defer srv.Resume()
	clk.Add(30 * time.Second)
	got := st.Read(ctx, []Query{known, unread})
	if r := got[0]; r.Err != nil || !r.Stale || r.AgeMs != 30_000 || r.Counts[0].Day != 3 || r.Counts[0].Windows[0] != 3 {
		t.Errorf("a read of known counts with Redis stopped: %+v, want 3s, stale, 30 s old", r)
	}
	if r := got[1]; r.Err == nil || r.Stale || r.Counts[0].Day != 0 {
		t.Errorf("a read of counts never read, with Redis stopped: %+v, want 0 and an error", r)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := st.Incr(wctx, &known); err == nil {
		t.Error("a write with Redis stopped succeeded")
	}
	clk.Add(31 * time.Second)
	if r := st.Read(ctx, []Query{known})[0]; r.Err == nil || r.Stale || r.Counts[0].Day != 0 {
		t.Errorf("a read 61 s after the last good one: %+v, want 0 and an error", r)
	}
	if n := testutilCount(st.m.staleReads); n != 2 {
		t.Errorf("stale reads metric %v, want 2 (the day and the window)", n)
	}
}

// A last-known window ages: its TTL shrinks by the value's age, and once
// the window has ended the stale answer is that it has (0, no live window).
func TestLastKnownWindowsEnd(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Now())
	st, _ := testStore(t, srv, clk, "COUNTER_READ_TIMEOUT=20ms", "COUNTER_STALE_MAX=60s")
	ctx := context.Background()
	key := counting.Item{Scope: counting.Scope{Business: 3}, Subject: counting.Subject{ID: "k"}, Spec: counting.Spec{Kind: counting.Seconds}}
	add := key
	add.Spec.Span, add.Hits = 10, 1
	if r := st.Write(ctx, []counting.Item{add})[0]; r.Code != 0 || r.Count != 1 {
		t.Fatalf("add: %+v", r)
	}
	if r := st.Store.Read(ctx, []counting.Item{key})[0]; r.Code != 0 || r.Count != 1 || r.TTLMs < 9000 {
		t.Fatalf("read with Redis up: %+v", r)
	}
	srv.Pause()
	defer srv.Resume()
	clk.Add(4 * time.Second)
	if r := st.Store.Read(ctx, []counting.Item{key})[0]; !r.Stale || r.Count != 1 || r.TTLMs > 6000 || r.TTLMs < 5000 {
		t.Errorf("4 s later, Redis stopped: %+v, want count 1 and about 6 s left, stale", r)
	}
	clk.Add(7 * time.Second)
	if r := st.Store.Read(ctx, []counting.Item{key})[0]; !r.Stale || r.Code != apierr.KeyNotFound || r.Count != 0 || r.TTLMs != 0 {
		t.Errorf("11 s later, past the window's end: %+v, want 0, no live window, stale", r)
	}
}

// While Redis answers no read in time, reads stop waiting on it: after the
// first one runs out of time, the others answer at once (last-known or
// zero), one in every 50 ms still asks Redis, and the first answer Redis
// gives ends the stall.
func TestAStalledRedisIsNotWaitedOn(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=300ms", "COUNTER_STALE_MAX=60s")
	ctx := context.Background()
	q := []Query{{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "stall"}}}}
	mustIncr(t, st, q[0])
	if r := st.Read(ctx, q)[0]; r.Err != nil || r.Counts[0].Day != 1 {
		t.Fatalf("read with Redis up: %+v", r)
	}
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	// The deadline is kept to the instant (reads share their timers, and a
	// read in its last tick waits out the rest).
	if r := st.Read(ctx, q)[0]; !r.Stale || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("the first read of a frozen Redis: %+v after %s, want stale after the 300 ms deadline", r, time.Since(start))
	}
	waited := 0
	for range 50 {
		start := time.Now()
		r := st.Read(ctx, q)[0]
		if !r.Stale || r.Counts[0].Day != 1 {
			t.Fatalf("read during the stall: %+v, want the last-known count", r)
		}
		if time.Since(start) >= 300*time.Millisecond*15/16 {
			waited++ // a probe
		}
	}
	if waited > 2 {
		t.Errorf("%d of 50 reads in a row waited out the deadline on a frozen Redis, want a probe now and then", waited)
	}
	srv.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := st.Read(ctx, q)[0]
		if r.Err == nil && !r.Stale {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fresh read 5 s after Redis came back: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.Stalled() {
		t.Error("a fresh read did not end the stall")
	}
}

// The hour windows of one dimension are read with one HGETALL of its hour
// buckets, and each window sums its own newest hours.
func TestWindowsOfADimensionShareOneHGETALL(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC))
	st, _ := testStore(t, srv, clk)
	q := Query{CID: "9", Event: "win", Windows: []int{1}, Dims: []Dim{{Name: "device", ID: "w"}, {Name: "tagid", ID: "t"}}}
	for i, h := range []int{30, 5, 2, 0, 0} { // hours ago: 1 + 1 + 1 + 2 events
		clk.Set(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC).Add(-time.Duration(h) * time.Hour))
		q.EID = fmt.Sprintf("w-%d", i)
		mustIncr(t, st, q)
	}
	clk.Set(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC))
	read := Query{CID: "9", Event: "win", Windows: []int{1, 3, 6, 24, 48}, Dims: q.Dims}
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	r := st.Read(context.Background(), []Query{read})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	for d := range read.Dims {
		if got, want := r.Counts[d].Windows, []int64{2, 3, 4, 4, 5}; !slices.Equal(got, want) {
			t.Errorf("%s windows %v: %v, want %v", read.Dims[d].Name, read.Windows, got, want)
		}
	}
	if n := srv.TotalCalls(t, "hgetall"); n != 2 {
		t.Errorf("5 windows on 2 dimensions cost %d HGETALL, want one per dimension", n)
	}
}

// TestEventsOfAHotCounterShareOneRun: the notices of one bundle in a batch
// are counted by one script run, and each is answered as if it had run
// alone: its count right after it, an event id counted before (or twice in
// the batch) a duplicate.
func TestEventsOfAHotCounterShareOneRun(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	scope := counting.Scope{Campaign: "7", Event: "win"}
	bundle := counting.Subject{Dim: "bundle", ID: "com.hot"}
	event := func(subj counting.Subject, eid string) []counting.Item {
		return []counting.Item{
			{Scope: scope, Subject: subj, Hits: 1, EventID: eid, Spec: counting.Spec{Kind: counting.Day, Span: 1}},
			{Scope: scope, Subject: subj, Hits: 1, EventID: eid, Spec: counting.Spec{Kind: counting.Hours, Span: 3}},
		}
	}
	if r := v.Store.Write(context.Background(), event(bundle, "h5")); r[0].Code != 0 || r[0].Count != 1 {
		t.Fatalf("first write: %+v", r)
	}
	var batch []counting.Item
	for i := range 50 {
		batch = append(batch, event(bundle, fmt.Sprint("h", i))...)
		batch = append(batch, event(counting.Subject{Dim: "device", ID: fmt.Sprint("d", i)}, fmt.Sprint("h", i))...)
	}
	batch = append(batch, event(bundle, "h10")...) // sent twice in one batch
	loadLibrary(t, srv)                            // no "Function not found" round on any master
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	got := v.Store.Write(context.Background(), batch)

	count := int64(1) // h5
	for i := range 50 {
		dup := i == 5
		if !dup {
			count++
		}
		for p, r := range got[4*i : 4*i+2] {
			if r.Code != 0 || r.Count != count || r.Duplicate != dup {
				t.Errorf("bundle, event h%d, item %d: %+v, want count %d duplicate %v", i, p, r, count, dup)
			}
		}
		for p, r := range got[4*i+2 : 4*i+4] {
			if r.Code != 0 || r.Count != 1 || r.Duplicate {
				t.Errorf("device d%d, item %d: %+v, want count 1", i, p, r)
			}
		}
	}
	for p, r := range got[200:] {
		if r.Code != 0 || r.Count != 50 || !r.Duplicate {
			t.Errorf("h10 again, item %d: %+v, want the duplicate of count 50", p, r)
		}
	}
	// 50 device runs, one for the bundle's 50 events, one for h10 again.
	if n := srv.TotalCalls(t, "fcall"); n != 52 {
		t.Errorf("%d script runs, want 52", n)
	}
	r := v.Read(context.Background(), []Query{{CID: "7", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.hot"}}}})[0]
	if r.Err != nil || r.Counts[0].Day != 50 || r.Counts[0].Windows[0] != 50 {
		t.Errorf("bundle read: %+v, want 50 and 50", r)
	}
}

// TestWinsOfAHotCounterShareOneRun: the wins of one counter share a run
// with their releases, since no argument names a bid; each ends its own
// bid if it was reserved, and is answered with what was live right after it.
func TestWinsOfAHotCounterShareOneRun(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	scope := counting.Scope{Campaign: "7", Event: "win"}
	bundle := counting.Subject{Dim: "bundle", ID: "com.hot"}
	var bids []counting.Item
	for i := range 10 {
		bids = append(bids, counting.Item{Scope: scope, Subject: bundle, Hits: 1, EventID: fmt.Sprint("b", i), Spec: counting.Spec{Kind: counting.Reserve, Span: 60_000}})
	}
	bids = append(bids, counting.Item{Scope: scope, Subject: bundle, Hits: 1, EventID: "other", Spec: counting.Spec{Kind: counting.Reserve, Span: 60_000}})
	for i, r := range v.Store.Write(context.Background(), bids) {
		if r.Code != 0 || r.Duplicate {
			t.Fatalf("reserve %d: %+v", i, r)
		}
	}
	var wins []counting.Item
	for i := range 20 {
		eid := fmt.Sprint("b", i)
		wins = append(wins,
			counting.Item{Scope: scope, Subject: bundle, Hits: 1, EventID: eid, Spec: counting.Spec{Kind: counting.Release}},
			counting.Item{Scope: scope, Subject: bundle, Hits: 1, EventID: eid, Spec: counting.Spec{Kind: counting.Day, Span: 1}})
	}
	loadLibrary(t, srv)
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	got := v.Store.Write(context.Background(), wins)
	if n := srv.TotalCalls(t, "fcall"); n != 1 {
		t.Errorf("%d script runs for 20 wins of one counter, want 1", n)
	}
	for i := range 20 {
		rel, day := got[2*i], got[2*i+1]
		live, dup := int64(11-min(i+1, 10)), i >= 10 // b10.. were never reserved
		if rel.Code != 0 || rel.Count != live || rel.Duplicate != dup {
			t.Errorf("release of b%d: %+v, want %d live, duplicate %v", i, rel, live, dup)
		}
		if day.Code != 0 || day.Count != int64(i+1) || day.Duplicate {
			t.Errorf("win b%d: %+v, want count %d", i, day, i+1)
		}
	}
	left := v.Store.Read(context.Background(), []counting.Item{{Scope: scope, Subject: bundle, Spec: counting.Spec{Kind: counting.Reserve}}})
	if left[0].Code != 0 || left[0].Count != 1 {
		t.Errorf("after the wins: %+v, want only the bid never won live", left[0])
	}
	again := v.Store.Write(context.Background(), wins[:2])
	if !again[0].Duplicate || !again[1].Duplicate || again[1].Count != 20 {
		t.Errorf("win b0 again: %+v, want duplicates, count 20", again)
	}
}

// TestRunsOfACounterGoAgainInOrder: the runs of one counter tag in a
// batch all call the library's count function, so a library Redis lacks
// (FUNCTION FLUSH, a restart without persistence) fails them all; the
// store loads it and they go again in their order: each event is
// answered as if it ran alone, in order.
func TestRunsOfACounterGoAgainInOrder(t *testing.T) {
	srv := redistest.Start(t)
	v, _ := testStore(t, srv, newClock(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC)))
	scope, subj := counting.Scope{Campaign: "9", Event: "win"}, counting.Subject{Dim: "bundle", ID: "com.order"}
	day := counting.Spec{Kind: counting.Day, Span: 1}
	batch := []counting.Item{
		{Scope: scope, Subject: subj, Hits: 1, EventID: "a", Spec: day}, // a run of the day alone
		{Scope: scope, Subject: subj, Hits: 1, EventID: "b", Spec: day}, // the day and the hours
		{Scope: scope, Subject: subj, Hits: 1, EventID: "b", Spec: counting.Spec{Kind: counting.Hours, Span: 3}},
	}
	srv.OnMasters(t, "FUNCTION", "FLUSH")
	got := v.Store.Write(context.Background(), batch)
	for i, want := range []int64{1, 2, 1} {
		if got[i].Code != 0 || got[i].Count != want {
			t.Errorf("item %d: %+v, want count %d", i, got[i], want)
		}
	}
}

// loadLibrary loads the library on every master, as the store
// does at its first "Function not found".
func loadLibrary(t *testing.T, srv *redistest.Server) {
	t.Helper()
	src, _ := core.Library()
	srv.OnMasters(t, "FUNCTION", "LOAD", "REPLACE", src)
}

// TestConcurrentWritesShareBatches: writes that arrive while others are
// in flight go out together, so concurrent notices of one bundle share
// runs; each still gets its own count, and every count is there once.
func TestConcurrentWritesShareBatches(t *testing.T) {
	srv := redistest.Start(t)
	v, _ := testStore(t, srv, newClock(time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC)))
	loadLibrary(t, srv)
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	const n = 400
	counts := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := Query{CID: "8", Event: "win", EID: fmt.Sprint("c", i), Dims: []Dim{{Name: "bundle", ID: "com.together"}}}
			r, err := v.Incr(context.Background(), &q)
			if err != nil {
				t.Error(err)
				return
			}
			counts <- r.Counts[0].Day
		})
	}
	wg.Wait()
	close(counts)
	var got []int64
	for c := range counts {
		got = append(got, c)
	}
	slices.Sort(got)
	for i, c := range got {
		if c != int64(i+1) {
			t.Fatalf("the %d-th count is %d: each of 1..%d once, want %v...", i, c, n, got[:min(len(got), 10)])
		}
	}
	if runs := srv.TotalCalls(t, "fcall"); runs >= n {
		t.Errorf("%d concurrent writes of one bundle took %d runs: none shared", n, runs)
	} else {
		t.Logf("%d concurrent writes of one bundle took %d runs", n, runs)
	}
}

// During a stall, a read whose counts are all in the process's
// client-side cache (a bundle's) is answered from it, fresh, as outside a
// stall; a device's read is not waited on.
func TestAStallAnswersWhatTheTableHolds(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=300ms", "COUNTER_STALE_MAX=60s")
	ctx := context.Background()
	bundle := []Query{{CID: "1", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.stall"}}}}
	device := []Query{{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "stall"}}}}
	mustIncr(t, st, bundle[0])
	mustIncr(t, st, bundle[0])
	mustIncr(t, st, device[0])
	// Read until the bundle's counts are answered from the table (its
	// first read fills it): a read that is all cache hits.
	waitFor(t, 5*time.Second, func() bool {
		hits, misses := testutilCount(st.m.cacheHits), testutilCount(st.m.cacheMisses)
		r := st.Read(ctx, bundle)[0]
		return r.Err == nil && r.Counts[0].Day == 2 && testutilCount(st.m.cacheHits) > hits && testutilCount(st.m.cacheMisses) == misses
	})
	if r := st.Read(ctx, device)[0]; r.Err != nil || r.Counts[0].Day != 1 {
		t.Fatalf("device read with Redis up: %+v", r)
	}
	flushes := st.cache.Flushes()
	srv.Pause()
	defer srv.Resume()
	if r := st.Read(ctx, device)[0]; !r.Stale {
		t.Fatalf("the first read of a frozen Redis: %+v, want stale", r)
	}
	if !st.Stalled() {
		t.Fatal("a read that ran out of time did not start a stall")
	}
	for range 20 {
		start := time.Now()
		r := st.Read(ctx, bundle)[0]
		if r.Stale && tableFlushed(t, st, flushes) {
			return
		}
		if r.Err != nil || r.Stale || r.Counts[0].Day != 2 || r.Counts[0].Windows[0] != 2 {
			t.Fatalf("the bundle's read during the stall: %+v, want its cached counts (2, 2), not stale", r)
		}
		if took := time.Since(start); took >= 300*time.Millisecond {
			t.Fatalf("the bundle's read during the stall took %s", took)
		}
	}
}

// TestAReadPastItsDeadlineAnswersWhatTheTableHolds: a read of a bundle's
// counts (in the process's table) beside a device's (not cached) on a
// frozen Redis answers the bundle's fresh, not last-known, at the deadline
// and then during the stall its device's count starts; a device never read
// answers zero, degraded, beside them.
func TestAReadPastItsDeadlineAnswersWhatTheTableHolds(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=300ms", "COUNTER_STALE_MAX=60s")
	ctx := context.Background()
	bundle := Query{CID: "1", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.late"}}}
	device := Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "late"}}}
	unread := Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "never-read"}}}
	mustIncr(t, st, bundle)
	mustIncr(t, st, bundle)
	mustIncr(t, st, device)
	waitFor(t, 5*time.Second, func() bool {
		hits, misses := testutilCount(st.m.cacheHits), testutilCount(st.m.cacheMisses)
		r := st.Read(ctx, []Query{bundle})[0]
		return r.Err == nil && r.Counts[0].Day == 2 && testutilCount(st.m.cacheHits) > hits && testutilCount(st.m.cacheMisses) == misses
	})
	if r := st.Read(ctx, []Query{device})[0]; r.Err != nil || r.Counts[0].Day != 1 {
		t.Fatalf("device read with Redis up: %+v", r)
	}
	flushes := st.cache.Flushes()
	srv.Pause()
	defer srv.Resume()
	check := func(when string, rs []Result) (checked bool) {
		t.Helper()
		if rs[0].Stale && tableFlushed(t, st, flushes) {
			return false
		}
		if r := rs[0]; r.Err != nil || r.Stale || r.Counts[0].Day != 2 || r.Counts[0].Windows[0] != 2 {
			t.Fatalf("%s: the bundle answered %+v, want its cached counts (2, 2), fresh", when, r)
		}
		if r := rs[1]; !r.Stale || r.Err != nil || r.Counts[0].Day != 1 {
			t.Fatalf("%s: the device answered %+v, want its last-known count 1", when, r)
		}
		if r := rs[2]; r.Err == nil || r.Counts[0].Day != 0 {
			t.Fatalf("%s: the device never read answered %+v, want zero with an error", when, r)
		}
		return true
	}
	start := time.Now()
	if !check("at the deadline", st.Read(ctx, []Query{bundle, device, unread})) {
		return
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the first read of a frozen Redis answered after %s, before its deadline", took)
	}
	if !st.Stalled() {
		t.Fatal("a read whose every count sent to Redis ran out of time did not start a stall")
	}
	for range 10 {
		start := time.Now()
		if !check("during the stall", st.Read(ctx, []Query{bundle, device, unread})) {
			return
		}
		if took := time.Since(start); took >= 300*time.Millisecond {
			t.Fatalf("a read during the stall took %s", took)
		}
	}
}

// tableFlushed reports whether the process's client-side cache was emptied
// since it had flushes flushes, which a read that found a cached count
// gone says: a connection broke, and what the table held could have missed
// invalidations. On a Cluster the client may replace a connection as it
// learns the topology, so what such a test checks next no longer holds
// there; with one Redis no connection breaks while it is frozen.
func tableFlushed(t *testing.T, st campaignStore, flushes int64) bool {
	t.Helper()
	if st.cache.Flushes() == flushes {
		return false
	}
	if !redistest.Clustered() {
		t.Fatal("the client-side cache was flushed while one Redis was frozen")
	}
	t.Log("a Cluster connection broke and the client-side cache was flushed: what the table held is not checked further")
	return true
}
