package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// periodsModel counts natural periods from the calendar alone: each hit
// at its instant, a period's sum the hits whose local date falls in this
// period or the span-1 before, each period named by its first day.
type periodsModel struct {
	hits []modelHit
}

type modelHit struct {
	at time.Time
	n  int64
}

// start is the first day of the period of t in loc, n periods back.
func periodStart(t time.Time, loc *time.Location, unit counting.Kind, back int) time.Time {
	l := t.In(loc)
	y, m, d := l.Date()
	switch unit {
	case counting.Weeks:
		return time.Date(y, m, d-(int(l.Weekday())+6)%7-7*back, 0, 0, 0, 0, loc)
	case counting.Months:
		return time.Date(y, m-time.Month(back), 1, 0, 0, 0, 0, loc)
	}
	return time.Date(y, m, d-back, 0, 0, 0, 0, loc)
}

func (m *periodsModel) sum(now time.Time, loc *time.Location, unit counting.Kind, span int) int64 {
	from := periodStart(now, loc, unit, span-1)
	var sum int64
	for _, h := range m.hits {
		if !h.at.Before(from) && !h.at.After(now) {
			sum += h.n
		}
	}
	return sum
}

// Days, weeks and months of period buckets agree with the calendar model
// hit by hit and read by read: New York's zone across the fall-back
// Sunday, month ends and a year's, random spans up to the periods kept,
// the clock jumping by up to two days (and now and then by weeks).
func TestPeriodsAgreeWithModel(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for ui, unit := range []counting.Kind{counting.Days, counting.Weeks, counting.Months} {
		t.Run(string(unit), func(t *testing.T) {
			srv := redistest.Start(t)
			clk := newClock(time.Date(2026, 10, 20, 9, 0, 0, 0, ny))
			st, _ := testStore(t, srv, clk) // the counter in UTC: the zone is the item's
			rng := rand.New(rand.NewPCG(uint64(ui), 17))
			const keep = 6
			m := &periodsModel{}
			it := counting.Item{Scope: counting.Scope{Campaign: "p", Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "d"},
				Spec: counting.Spec{Kind: unit, Span: keep, Keep: keep, Zone: ny.String()}}
			compared := map[bool]int{}
			for step := range 400 {
				d := time.Duration(rng.IntN(48*60)) * time.Minute
				if unit != counting.Days {
					d *= 4
				}
				clk.Add(d)
				span := 1 + rng.IntN(keep)
				w := it
				w.Spec.Span = int64(span)
				var got counting.Result
				write := rng.IntN(3) > 0
				if write {
					w.Hits, w.EventID = int64(1+rng.IntN(3)), "e"+time.Duration(step).String()
					m.hits = append(m.hits, modelHit{clk.Now(), w.Hits})
					got = writeOne(t, st.Store, w)
				} else {
					got = readOne(t, st.Store, w)
				}
				if want := m.sum(clk.Now(), ny, unit, span); got.Count != want {
					t.Fatalf("step %d at %s, span %d (write %v): %d, model %d", step, clk.Now().In(ny).Format(time.RFC3339), span, write, got.Count, want)
				}
				compared[write]++
			}
			if compared[true] < 100 || compared[false] < 50 {
				t.Fatalf("compared %v", compared)
			}
			t.Logf("%d writes, %d reads compared; %s", compared[true], compared[false], clk.Now().In(ny).Format(time.DateOnly))
		})
	}
}
