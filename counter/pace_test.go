package main

import (
	"context"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

func mustPace(t *testing.T, st campaignStore, q Query, rule PaceRule) PaceResult {
	t.Helper()
	res, err := st.Pace(context.Background(), &q, rule)
	if err != nil {
		t.Fatalf("pace: %v", err)
	}
	return res
}

func TestPaceMinimumGapRejectsOnItsOwn(t *testing.T) {
	srv := redistest.Start(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	st, _ := testStore(t, srv, clk)
	rule := PaceRule{Window: time.Hour, Limit: 100, MinGap: 10 * time.Minute}
	q := Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "d"}}}

	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, counting.PaceAllowed},
		{10*time.Minute - time.Millisecond, counting.PaceTooSoon},
		{10 * time.Minute, counting.PaceAllowed},
		{15 * time.Minute, counting.PaceTooSoon},
		{20 * time.Minute, counting.PaceAllowed},
	}
	for _, s := range steps {
		clk.Set(t0.Add(s.at))
		res := mustPace(t, st, q, rule)
		if res.Result != s.want {
			t.Fatalf("at +%s: result %d, want %d (%+v)", s.at, res.Result, s.want, res)
		}
	}
	if res := mustPace(t, st, q, rule); res.Dims[0].LastAt != t0.Add(20*time.Minute).UnixMilli() || res.Dims[0].Count != 3 {
		t.Errorf("state after the steps: %+v, want 3 events, last at +20m", res.Dims[0])
	}
}

func TestPaceLimitRejectsOnItsOwnAndEventsLeaveExactly(t *testing.T) {
	srv := redistest.Start(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	st, _ := testStore(t, srv, clk)
	rule := PaceRule{Window: time.Hour, Limit: 3}
	q := Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "d"}}}
	for i := range 3 {
		clk.Set(t0.Add(time.Duration(i) * time.Second))
		if res := mustPace(t, st, q, rule); res.Result != counting.PaceAllowed || res.Dims[0].Count != int64(i+1) {
			t.Fatalf("event %d: %+v", i, res)
		}
	}
	clk.Set(t0.Add(time.Minute))
	if res := mustPace(t, st, q, rule); res.Result != counting.PaceOverLimit || res.Dims[0].Count != 3 {
		t.Fatalf("4th event in the window: %+v, want over_limit with 3", res)
	}
	// The first event is exactly one window old: still in.
	clk.Set(t0.Add(time.Hour))
	if res := mustPace(t, st, q, rule); res.Result != counting.PaceOverLimit {
		t.Fatalf("at exactly one window: %+v, want over_limit", res)
	}
	// One millisecond later it has left.
	clk.Set(t0.Add(time.Hour + time.Millisecond))
	if res := mustPace(t, st, q, rule); res.Result != counting.PaceAllowed || res.Dims[0].Count != 3 {
		t.Fatalf("after the first event left: %+v, want allowed with 3", res)
	}
}

func TestPaceReplayOfOneEventIDCountsOnce(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	st, _ := testStore(t, srv, clk)
	rule := PaceRule{Window: time.Hour, Limit: 5}
	q := Query{CID: "1", Event: "win", EID: "a1:1", Dims: []Dim{{Name: "device", ID: "d"}}}
	mustPace(t, st, q, rule)
	clk.Add(time.Second)
	res := mustPace(t, st, q, rule)
	if !res.Duplicate || res.Result != counting.PaceAllowed || res.Dims[0].Count != 1 {
		t.Fatalf("replay: %+v, want duplicate allowed with count 1", res)
	}
}

func TestPaceIsAllOrNothingAcrossDimensions(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	st, _ := testStore(t, srv, clk)
	rc := newClient(t, srv.URL())
	rule := PaceRule{Window: time.Hour, Limit: 1}
	mustPace(t, st, Query{CID: "1", Event: "win", Dims: []Dim{{Name: "bundle", ID: "full"}}}, rule)
	clk.Add(time.Second)
	res := mustPace(t, st, Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: "fresh"}, {Name: "bundle", ID: "full"}}}, rule)
	if res.Result != counting.PaceOverLimit || res.Dims[0].Result != counting.PaceAllowed || res.Dims[1].Result != counting.PaceOverLimit {
		t.Fatalf("result %+v, want over_limit from bundle", res)
	}
	if n := rawInt(t, rc, "ZCARD", "sfreq:{win:device:1:fresh}"); n != 0 {
		t.Errorf("device kept %d events of a refused request", n)
	}
	if res.Dims[0].Count != 0 || res.Dims[0].LastAt != 0 {
		t.Errorf("device outcome %+v, want the state before the call", res.Dims[0])
	}
}

func TestIncrRecordsPaceAndReadsReturnIt(t *testing.T) {
	srv := redistest.Start(t)
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clk := newClock(t0)
	st, _ := testStore(t, srv, clk)
	rc := newClient(t, srv.URL())
	q := Query{CID: "1", Event: "win", PaceWindowSec: 600, EID: "e1", Dims: []Dim{{Name: "device", ID: "d"}, {Name: "bundle", ID: "b"}}}
	mustIncr(t, st, q)
	clk.Add(time.Second)
	mustIncr(t, st, q) // a replay: one member per event id
	clk.Add(time.Minute)
	q.EID = "e2"
	mustIncr(t, st, q)
	if n := rawInt(t, rc, "ZCARD", "sfreq:{win:device:1:d}:600"); n != 2 {
		t.Errorf("pace ZSet has %d members, want 2", n)
	}
	read := Query{CID: "1", Event: "win", PaceWindowSec: 600, Dims: []Dim{{Name: "device", ID: "d"}, {Name: "bundle", ID: "b"}}}
	res := st.Read(context.Background(), []Query{read})[0]
	want := counting.Pace{Count: 2, LastAt: t0.Add(61 * time.Second).UnixMilli()}
	for j := range read.Dims {
		if res.Err != nil || res.Counts[j].Pace != want {
			t.Errorf("dim %d pace = %+v (err %v), want %+v", j, res.Counts[j].Pace, res.Err, want)
		}
	}
	// Ten minutes after the first event, only the second is in the window.
	clk.Set(t0.Add(10*time.Minute + time.Millisecond))
	if res := st.Read(context.Background(), []Query{read})[0]; res.Counts[0].Pace.Count != 1 {
		t.Errorf("later pace count = %d, want 1", res.Counts[0].Pace.Count)
	}
}

func TestSeveralWindowsFromOneHash(t *testing.T) {
	srv := redistest.Start(t)
	now := time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)
	clk := newClock(now)
	st, _ := testStore(t, srv, clk)
	w := Query{CID: "1", Event: "win", Windows: []int{24}, Dims: []Dim{{Name: "device", ID: "d"}}}
	for _, ago := range []int{30, 20, 5, 1, 0, 0} {
		clk.Set(now.Add(-time.Duration(ago) * time.Hour))
		mustIncr(t, st, w)
	}
	clk.Set(now)
	r := Query{CID: "1", Event: "win", Windows: []int{1, 2, 6, 24}, Dims: []Dim{{Name: "device", ID: "d"}}}
	res := st.Read(context.Background(), []Query{r})[0]
	want := []int64{2, 3, 4, 5} // the 30 h old event is outside every window
	for i, n := range want {
		if res.Err != nil || res.Counts[0].Windows[i] != n {
			t.Errorf("window %dh = %d (err %v), want %d", r.Windows[i], res.Counts[0].Windows[i], res.Err, n)
		}
	}
}
