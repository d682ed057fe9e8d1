package core

import (
	"strconv"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
)

// A slot that already holds the same count, read moments ago, is left as
// it is; a new count, another key's, or an older copy is written.
func TestRememberSkipsOnlyTheSameRecentCount(t *testing.T) {
	l := newLastKnown(time.Minute, 1)
	items := []counting.Item{{Scope: counting.Scope{Campaign: "42", Event: "win"}, Subject: counting.Subject{Dim: "bundle", ID: "com.x"},
		Spec: counting.Spec{Kind: counting.Day, Span: 1}}}
	t0 := time.Unix(1_800_000_000, 0)
	got := func(now time.Time) counting.Result {
		t.Helper()
		res := []counting.Result{{Degraded: true}}
		if l.fill(items, res, func() time.Time { return now }) != 1 {
			t.Fatal("nothing remembered")
		}
		return res[0]
	}
	l.remember(items, []counting.Result{{Count: 3}}, t0)
	l.remember(items, []counting.Result{{Count: 3}}, t0.Add(10*time.Millisecond))
	if r := got(t0.Add(100 * time.Millisecond)); r.Count != 3 || r.AgeMs != 100 {
		t.Errorf("same count 10 ms later: %+v, want 3 aged from the first read (100 ms)", r)
	}
	l.remember(items, []counting.Result{{Count: 4}}, t0.Add(20*time.Millisecond))
	if r := got(t0.Add(100 * time.Millisecond)); r.Count != 4 || r.AgeMs != 80 {
		t.Errorf("new count: %+v, want 4 aged 80 ms", r)
	}
	l.remember(items, []counting.Result{{Count: 4}}, t0.Add(90*time.Millisecond))
	if r := got(t0.Add(100 * time.Millisecond)); r.AgeMs != 10 {
		t.Errorf("same count 70 ms later: %+v, want it read again (10 ms)", r)
	}
}

// A read's counts are each remembered in their own slot, those Redis did
// not answer (degraded or stale) not at all, in a batch of any size (one
// larger than remember's stack buffer too).
func TestRememberKeepsEachAnsweredCount(t *testing.T) {
	for _, n := range []int{3, 300} {
		l := newLastKnown(time.Minute, 64)
		items := make([]counting.Item, n)
		res := make([]counting.Result, n)
		for i := range items {
			items[i] = counting.Item{Scope: counting.Scope{Campaign: strconv.Itoa(i), Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "d"},
				Spec: counting.Spec{Kind: counting.Day, Span: 1}}
			res[i] = counting.Result{Count: int64(i + 1), Degraded: i%3 == 1, Stale: i%3 == 2 && i > 3}
		}
		now := time.Unix(1_800_000_000, 0)
		l.remember(items, res, now)
		got := make([]counting.Result, n)
		for i := range got {
			got[i].Degraded = true
		}
		l.fill(items, got, func() time.Time { return now.Add(time.Second) })
		for i, r := range got {
			want := !res[i].Degraded && !res[i].Stale
			if remembered := !r.Degraded; remembered != want || remembered && (r.Count != int64(i+1) || !r.Stale) {
				t.Errorf("batch of %d, count %d (%+v): after remember %+v", n, i, res[i], r)
			}
		}
	}
}

// BenchmarkLastKnownRemember: a bidder's batch read of 50 candidates on a
// device not read before, 100 counts (day and hours) remembered, in the
// default table of 64 MiB: each lands in a slot no read touched lately.
func BenchmarkLastKnownRemember(b *testing.B) {
	l := newLastKnown(time.Minute, 64)
	const devices = 1 << 14
	items := make([]counting.Item, 0, 100*devices)
	for d := range devices {
		for c := range 50 {
			for _, k := range []counting.Kind{counting.Day, counting.Hours} {
				items = append(items, counting.Item{Scope: counting.Scope{Campaign: strconv.Itoa(c), Event: "win"},
					Subject: counting.Subject{Dim: "device", ID: strconv.Itoa(d)}, Spec: counting.Spec{Kind: k, Span: 1}})
			}
		}
	}
	res := make([]counting.Result, 100)
	now := time.Now()
	i := 0
	for b.Loop() {
		l.remember(items[i*100:(i+1)*100], res, now)
		i = (i + 1) % devices
	}
}
