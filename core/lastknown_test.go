package core

import (
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
