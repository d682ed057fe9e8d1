package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// Reference models: each kind of counter in plain Go, driven by an
// injected clock. The Redis implementation must agree with them decision by
// decision on random streams.

// windowModel is kinds day and seconds: a count in a window opened by the
// first hit.
type windowModel struct {
	count int64
	endMs int64 // unix ms at which the live window ends; 0 when none
}

func (m *windowModel) live(nowMs int64) bool { return m.endMs > nowMs }

func (m *windowModel) hit(nowMs, hits, openEndMs int64) int64 {
	if !m.live(nowMs) {
		m.count, m.endMs = 0, openEndMs
	}
	m.count += hits
	return m.count
}

// modelDayEnd finds the end of the n-th natural day counting now's by
// walking minute by minute until the date in loc changes n times: slow,
// and independent of the calendar arithmetic of the implementation.
func modelDayEnd(now time.Time, loc *time.Location, n int) time.Time {
	t := now.Truncate(time.Minute)
	for changes := 0; changes < n; {
		y, m, d := t.In(loc).Date()
		t = t.Add(time.Minute)
		if y2, m2, d2 := t.In(loc).Date(); y2 != y || m2 != m || d2 != d {
			changes++
		}
	}
	return t
}

// hoursModel is kind hours: one bucket per epoch hour, R hours kept.
type hoursModel struct {
	buckets map[int64]int64
	keep    int64
}

func (m *hoursModel) hit(hour, hits int64) {
	m.buckets[hour] += hits
	for h := range m.buckets {
		if h < hour-m.keep {
			delete(m.buckets, h)
		}
	}
}

func (m *hoursModel) sum(hour, span int64) int64 {
	var n int64
	for h := hour - span + 1; h <= hour; h++ {
		n += m.buckets[h]
	}
	return n
}

// slidingModel is kind sliding: the scores of the admitted events.
type slidingModel struct {
	events map[string]int64 // event id -> unix ms
}

func (m *slidingModel) trim(nowMs, windowMs int64) {
	for id, at := range m.events {
		if at < nowMs-windowMs {
			delete(m.events, id)
		}
	}
}

func (m *slidingModel) state() (count, last int64) {
	for _, at := range m.events {
		count++
		last = max(last, at)
	}
	return count, last
}

// hit answers allowed, reason and duplicate as the kind must.
func (m *slidingModel) hit(nowMs int64, spec counting.Spec, id string) (bool, counting.Reason, bool) {
	m.trim(nowMs, spec.Span*1000)
	if _, ok := m.events[id]; ok {
		return true, "", true
	}
	count, last := m.state()
	if spec.Limit > 0 {
		if gap := spec.MinGapSec * 1000; gap > 0 && last > 0 && nowMs-last < gap {
			return false, counting.TooSoon, false
		}
		if count >= spec.Limit {
			return false, counting.OverLimit, false
		}
	}
	m.events[id] = nowMs
	return true, "", false
}

func writeOne(t *testing.T, st *core.Store, it counting.Item) counting.Result {
	t.Helper()
	r := st.Write(context.Background(), []counting.Item{it})[0]
	if r.Code != 0 {
		t.Fatalf("write %+v: %+v", it, r)
	}
	return r
}

func readOne(t *testing.T, st *core.Store, it counting.Item) counting.Result {
	t.Helper()
	r := st.Read(context.Background(), []counting.Item{it})[0]
	if r.Code != 0 && r.Code != 10002 {
		t.Fatalf("read %+v: %+v", it, r)
	}
	return r
}

func TestHoursAgreeWithModel(t *testing.T) {
	srv := redistest.Start(t)
	start := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := newClock(start)
	v, _ := testStore(t, srv, clk, "COUNTER_MAX_WINDOW_HOURS=24")
	rng := rand.New(rand.NewPCG(1, 2))
	m := &hoursModel{buckets: map[int64]int64{}, keep: 24}
	subj := counting.Subject{Dim: "device", ID: "model"}
	scope := counting.Scope{Campaign: "1", Event: "win"}
	for step := range 600 {
		// Mostly small steps, now and then a jump past the retention.
		d := time.Duration(rng.IntN(40)) * time.Minute
		if rng.IntN(50) == 0 {
			d = time.Duration(20+rng.IntN(20)) * time.Hour
		}
		clk.Add(d)
		hour := clk.Now().Unix() / 3600
		span := int64(1 + rng.IntN(24))
		it := counting.Item{Scope: scope, Subject: subj, Spec: counting.Spec{Kind: counting.Hours, Span: span}}
		if rng.IntN(2) == 0 {
			it.Hits = int64(1 + rng.IntN(3))
			got := writeOne(t, v.Store, it)
			m.hit(hour, it.Hits)
			if want := m.sum(hour, span); got.Count != want {
				t.Fatalf("step %d write span %d at %s: %d, model %d", step, span, clk.Now(), got.Count, want)
			}
			continue
		}
		got := readOne(t, v.Store, it)
		if want := m.sum(hour, span); got.Count != want {
			t.Fatalf("step %d read span %d at %s: %d, model %d", step, span, clk.Now(), got.Count, want)
		}
	}
}

func TestSlidingAgreesWithModel(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 23, 50, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	rng := rand.New(rand.NewPCG(3, 4))
	specs := []counting.Spec{
		{Kind: counting.Sliding, Span: 60},                            // record only (split mode)
		{Kind: counting.Sliding, Span: 60, Limit: 3},                  // exact cap
		{Kind: counting.Sliding, Span: 600, Limit: 4, MinGapSec: 120}, // cap and minimum gap
	}
	for si, spec := range specs {
		m := &slidingModel{events: map[string]int64{}}
		it := counting.Item{Scope: counting.Scope{Campaign: "2", Event: "win"}, Subject: counting.Subject{Dim: "device", ID: fmt.Sprint("s", si)}, Spec: spec}
		var ids []string
		for step := range 400 {
			// Steps around the window's and the gap's edges, to the ms.
			clk.Add(time.Duration(rng.IntN(int(spec.Span*1000/3))) * time.Millisecond)
			now := clk.Now().UnixMilli()
			if rng.IntN(3) == 0 {
				got := readOne(t, v.Store, it)
				m.trim(now, spec.Span*1000)
				count, last := m.state()
				if got.Count != count || got.LastAt != last {
					t.Fatalf("spec %d step %d read: count %d last %d, model %d %d", si, step, got.Count, got.LastAt, count, last)
				}
				continue
			}
			w := it
			w.Hits = 1
			// A replay now and then: one member per event id.
			if len(ids) > 0 && rng.IntN(5) == 0 {
				w.EventID = ids[rng.IntN(len(ids))]
			} else {
				w.EventID = fmt.Sprint("e", step)
				ids = append(ids, w.EventID)
			}
			got := writeOne(t, v.Store, w)
			allowed, reason, dup := m.hit(now, spec, w.EventID)
			count, last := m.state()
			if got.Allowed != allowed || got.Reason != reason || got.Duplicate != dup || got.Count != count || got.LastAt != last {
				t.Fatalf("spec %d step %d hit %s: got allowed=%v %q dup=%v count=%d last=%d, model %v %q %v %d %d",
					si, step, w.EventID, got.Allowed, got.Reason, got.Duplicate, got.Count, got.LastAt, allowed, reason, dup, count, last)
			}
		}
	}
}

// realClock is now plus a fixed offset: it moves with real time, so Redis's
// own expiry (real time) and the counter's clock agree, while the offset
// puts the stream just before a midnight of our choosing.
// last is the instant the store last read, so the model decides at the
// same instant as the store did.
type realClock struct {
	offset time.Duration
	last   atomic.Int64
}

func newRealClock(at time.Time) *realClock { return &realClock{offset: time.Until(at)} }

func (c *realClock) Now() time.Time {
	t := time.Now().Add(c.offset)
	c.last.Store(t.UnixNano())
	return t
}

func (c *realClock) Last() time.Time { return time.Unix(0, c.last.Load()) }

// begin starts a span around one call of a store on c.
func (c *realClock) begin() *callSpan { return &callSpan{c: c, before: c.Now().UnixMilli()} }

// callSpan brackets one call of a store by clock readings just before and
// just after it: the store read its clock between the two, and Redis
// measured any TTL it answers between them, so on a loaded machine, where
// the two may be far apart, a decision is judged against the whole span
// rather than one instant.
type callSpan struct {
	c             *realClock
	before, after int64 // unix ms
}

// end closes the span after the call: the store's latest clock reading,
// the instant the model decides at.
func (s *callSpan) end() time.Time {
	t0 := s.c.Last()
	s.after = s.c.Now().UnixMilli()
	return t0
}

// near reports whether an end (unix ms; 0 for none) falls within guard ms
// of the span: either side of it may have won the race.
func (s *callSpan) near(endMs, guard int64) bool {
	return endMs > 0 && endMs > s.before-guard && endMs < s.after+guard
}

// fits reports whether a TTL answered within the span is what an end
// (unix ms) leaves, give or take guard ms.
func (s *callSpan) fits(ttlMs, endMs, guard int64) bool {
	return ttlMs >= endMs-s.after-guard && ttlMs <= endMs-s.before+guard
}

// trail is how far a key's real end may trail the model's (ms) after a
// write made within s, late before it; opens says the write opened the
// window or period. Redis sets a TTL from when it runs a write, at most
// the write's span after the store read its clock, so the longest write
// since the window opened bounds it.
func (s *callSpan) trail(late int64, opens bool) int64 {
	if opens {
		late = 0
	}
	return max(late, s.after-s.before)
}

// TestWindowsAgreeWithModel runs random hits and reads of the window kinds
// across real window ends: a window of seconds, midnight in Shanghai, and
// the end of New York's 25-hour fall-back day. Decisions within a few ms of
// a window's end are not compared: Redis runs a script a little after the
// counter reads its clock.
func TestWindowsAgreeWithModel(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	sh, _ := time.LoadLocation("Asia/Shanghai")
	tests := []struct {
		name string
		tz   string
		loc  *time.Location
		at   time.Time // where the stream starts
		spec counting.Spec
	}{
		{"seconds", "UTC", time.UTC, time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), counting.Spec{Kind: counting.Seconds, Span: 1}},
		{"day across Shanghai midnight", "Asia/Shanghai", sh, time.Date(2026, 12, 2, 23, 59, 58, 800_000_000, sh), counting.Spec{Kind: counting.Day, Span: 1}},
		{"two days", "Asia/Shanghai", sh, time.Date(2026, 12, 2, 23, 59, 59, 0, sh), counting.Spec{Kind: counting.Day, Span: 2}},
		{"end of the 25 h day", "America/New_York", ny, time.Date(2026, 11, 1, 23, 59, 58, 800_000_000, ny), counting.Spec{Kind: counting.Day, Span: 1}},
	}
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			s := testSettings(t, srv.URL(), "COUNTER_TIMEZONE="+tt.tz)
			clk := newRealClock(tt.at)
			st := newTestStore(t, srv.URL(), s, clk.Now)
			t.Cleanup(st.Close)
			rng := rand.New(rand.NewPCG(uint64(ti), 5))
			m := &windowModel{}
			it := counting.Item{Scope: counting.Scope{Business: 9}, Subject: counting.Subject{ID: "user:" + tt.name}, Spec: tt.spec}
			// ms either side of a window's end, and the most a TTL may
			// differ: Redis runs the script (and measures PTTL) a little
			// after the store read its clock, more so under -race.
			const guard = 100
			var late int64 // see callSpan.trail
			end := time.Now().Add(2500 * time.Millisecond)
			compared := 0
			for time.Now().Before(end) {
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond) // pace of the stream, not a wait
				if rng.IntN(3) == 0 {
					r := it
					r.Spec.Span = 0 // a read of whatever window is live
					sp := clk.begin()
					got := readOne(t, st.Store, r)
					t0 := sp.end()
					if sp.near(m.endMs, guard+late) {
						continue
					}
					compared++
					live := m.live(t0.UnixMilli())
					if (got.Code == 0) != live || (live && (got.Count != m.count || !sp.fits(got.TTLMs, m.endMs, guard+late))) {
						t.Fatalf("read at %s: %+v, model live=%v count=%d ends %s", t0.In(tt.loc), got, live, m.count, time.UnixMilli(m.endMs).In(tt.loc))
					}
					continue
				}
				w := it
				w.Hits = int64(1 + rng.IntN(3))
				sp := clk.begin()
				got := writeOne(t, st.Store, w)
				t0 := sp.end()
				nearEnd := sp.near(m.endMs, guard+late)
				late = sp.trail(late, !m.live(t0.UnixMilli()))
				var openEnd int64
				if tt.spec.Kind == counting.Seconds {
					openEnd = t0.Add(time.Duration(tt.spec.Span) * time.Second).UnixMilli()
				} else {
					openEnd = modelDayEnd(t0, tt.loc, int(tt.spec.Span)).UnixMilli()
				}
				want := m.hit(t0.UnixMilli(), w.Hits, openEnd)
				if nearEnd {
					// Either side may have won the race: follow Redis.
					m.count = got.Count
					m.endMs = t0.UnixMilli() + got.TTLMs
					continue
				}
				compared++
				if got.Count != want || !sp.fits(got.TTLMs, m.endMs, guard+late) {
					t.Fatalf("hit %d at %s: count %d ttl %d ms, model %d ends %s", w.Hits, t0.In(tt.loc), got.Count, got.TTLMs, want, time.UnixMilli(m.endMs).In(tt.loc))
				}
			}
			if compared < 20 {
				t.Fatalf("only %d decisions compared", compared)
			}
		})
	}
}

// TestModelDayEndMatchesCalendar pins the model itself on the days that
// matter: a plain day, DST days, and several days.
func TestModelDayEndMatchesCalendar(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, tt := range []struct {
		now  time.Time
		loc  *time.Location
		n    int
		want time.Duration
	}{
		{time.Date(2026, 11, 1, 0, 0, 0, 0, ny), ny, 1, 25 * time.Hour},
		{time.Date(2026, 3, 8, 0, 0, 0, 0, ny), ny, 1, 23 * time.Hour},
		{time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, 2, 12*time.Hour + 23*time.Hour},
		{time.Date(2026, 12, 2, 23, 59, 0, 0, time.UTC), time.UTC, 1, time.Minute},
	} {
		if got := modelDayEnd(tt.now, tt.loc, tt.n).Sub(tt.now); got != tt.want {
			t.Errorf("model: day end of %s + %d = %s, want %s", tt.now, tt.n, got, tt.want)
		}
	}
}

// dedupeModel is the event-id check of the counters of one tag: an id is
// remembered, with the counters it counted on, for the dedupe TTL after it
// last counted on one.
type dedupeModel struct {
	ttlMs int64
	ids   map[string]dedupeEntry
}

type dedupeEntry struct {
	atMs int64
	on   map[counting.Kind]bool
}

// counts reports whether the event id counts on the counter of kind k now
// (false: a duplicate), and remembers it.
func (m *dedupeModel) counts(nowMs int64, id string, k counting.Kind) bool {
	if id == "" {
		return true
	}
	for x, e := range m.ids {
		if e.atMs < nowMs-m.ttlMs {
			delete(m.ids, x)
		}
	}
	e, ok := m.ids[id]
	if ok && e.on[k] {
		return false
	}
	if !ok {
		e.on = map[counting.Kind]bool{}
	}
	e.on[k], e.atMs = true, nowMs
	m.ids[id] = e
	return true
}

// TestEventIDsAgreeWithModel writes random batches of day and hour items on
// two dimensions' counters, with event ids drawn from a small pool (so
// replays, replays after the dedupe TTL, an id counted on the day alone
// and later on the hours, and an item twice in one batch all occur), and
// compares every count and duplicate with the models.
func TestEventIDsAgreeWithModel(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk, "COUNTER_DEDUPE_TTL=10m", "COUNTER_MAX_WINDOW_HOURS=24")
	rng := rand.New(rand.NewPCG(7, 8))
	scope := counting.Scope{Campaign: "1", Event: "win"}
	subjects := []counting.Subject{{Dim: "device", ID: "d1"}, {Dim: "bundle", ID: "com.b"}}
	type counters struct {
		day    int64
		hours  *hoursModel
		dedupe *dedupeModel
	}
	ms := make([]*counters, len(subjects))
	for i := range ms {
		ms[i] = &counters{hours: &hoursModel{buckets: map[int64]int64{}, keep: 24}, dedupe: &dedupeModel{ttlMs: 600_000, ids: map[string]dedupeEntry{}}}
	}
	dups, quiet := 0, 0
	for step := range 400 {
		// Up to 4 min a step stays inside the day; now and then past the TTL.
		clk.Add(time.Duration(rng.IntN(240)) * time.Second)
		if rng.IntN(40) == 0 {
			clk.Add(10*time.Minute + time.Duration(rng.IntN(2000))*time.Millisecond)
		}
		now := clk.Now()
		if now.Day() != 2 {
			break
		}
		var batch []counting.Item
		var of []int
		for range 1 + rng.IntN(6) {
			s := rng.IntN(len(subjects))
			it := counting.Item{Scope: scope, Subject: subjects[s], Hits: int64(1 + rng.IntN(2))}
			if rng.IntN(8) > 0 {
				it.EventID = fmt.Sprint("e", rng.IntN(30))
			}
			// Quiet, as callback forwards: code and duplicate only.
			it.Quiet = rng.IntN(3) == 0
			it.Spec = counting.Spec{Kind: counting.Day, Span: 1}
			if rng.IntN(2) == 0 {
				it.Spec = counting.Spec{Kind: counting.Hours, Span: int64(1 + rng.IntN(24))}
			}
			batch = append(batch, it)
			of = append(of, s)
			if rng.IntN(3) == 0 {
				// The same event on the subject's other counter, as one
				// notice counts its day and its hours.
				other := it
				other.Spec = counting.Spec{Kind: counting.Hours, Span: 3}
				if it.Spec.Kind == counting.Hours {
					other.Spec = counting.Spec{Kind: counting.Day, Span: 1}
				}
				batch = append(batch, other)
				of = append(of, s)
			}
		}
		got := v.Store.Write(context.Background(), batch)
		hour := now.Unix() / 3600
		for i, it := range batch {
			m := ms[of[i]]
			counts := m.dedupe.counts(now.UnixMilli(), it.EventID, it.Spec.Kind)
			var want int64
			if it.Spec.Kind == counting.Day {
				if counts {
					m.day += it.Hits
				}
				want = m.day
			} else {
				if counts {
					m.hours.hit(hour, it.Hits)
				}
				want = m.hours.sum(hour, it.Spec.Span)
			}
			if !counts {
				dups++
			}
			if it.Quiet {
				quiet++
				want = 0
			}
			if r := got[i]; r.Code != 0 || r.Count != want || r.TTLMs != 0 && it.Quiet || r.Duplicate == counts {
				t.Fatalf("step %d item %d %+v at %s: %+v, model count %d duplicate %v", step, i, it, now, r, want, !counts)
			}
		}
	}
	if dups < 50 || quiet < 100 {
		t.Fatalf("only %d duplicates and %d quiet writes in the stream", dups, quiet)
	}
}

// modelPeriodEnd finds the end of now's natural week (Monday 00:00) or
// month in loc by walking minute by minute until the date in loc starts a
// new one: slow, and independent of the implementation's calendar.
func modelPeriodEnd(now time.Time, loc *time.Location, unit counting.Kind) time.Time {
	t := now.Truncate(time.Minute)
	for {
		before := t.In(loc)
		t = t.Add(time.Minute)
		after := t.In(loc)
		if before.Day() == after.Day() {
			continue
		}
		if unit == counting.Day || unit == counting.Week && after.Weekday() == time.Monday || unit == counting.Month && after.Month() != before.Month() {
			return t
		}
	}
}

// The model's period ends on the dates that matter: New York's 169-hour
// week of the fall-back Sunday, its 167-hour week of spring-forward, a
// month's end and a year's.
func TestModelPeriodEndMatchesCalendar(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, tt := range []struct {
		now  time.Time
		unit counting.Kind
		want time.Time
		len  time.Duration // from the period's start, for weeks
	}{
		{time.Date(2026, 10, 28, 12, 0, 0, 0, ny), counting.Week, time.Date(2026, 11, 2, 0, 0, 0, 0, ny), 169 * time.Hour},
		{time.Date(2027, 3, 14, 23, 0, 0, 0, ny), counting.Week, time.Date(2027, 3, 15, 0, 0, 0, 0, ny), 167 * time.Hour},
		{time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), counting.Week, time.Date(2026, 12, 14, 0, 0, 0, 0, time.UTC), 168 * time.Hour},
		{time.Date(2026, 11, 30, 23, 59, 0, 0, ny), counting.Month, time.Date(2026, 12, 1, 0, 0, 0, 0, ny), 0},
		{time.Date(2026, 12, 31, 10, 0, 0, 0, time.UTC), counting.Month, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		got := modelPeriodEnd(tt.now, tt.now.Location(), tt.unit)
		if !got.Equal(tt.want) {
			t.Errorf("%s of %s ends %s, want %s", tt.unit, tt.now, got, tt.want)
		}
		if tt.len > 0 {
			start := modelPeriodEnd(tt.want.Add(-8*24*time.Hour), tt.now.Location(), counting.Week)
			if got.Sub(start) != tt.len {
				t.Errorf("the week ending %s lasts %s, want %s", got, got.Sub(start), tt.len)
			}
		}
	}
}

// TestNaturalPeriodsAgreeWithModel runs random hits and reads of a
// campaign's week and month counters across real period ends: the end of
// New York's 169-hour week (the fall-back Sunday) and a month's end in
// Shanghai. Decisions within a few ms of the end are not compared, as in
// TestWindowsAgreeWithModel.
func TestNaturalPeriodsAgreeWithModel(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	sh, _ := time.LoadLocation("Asia/Shanghai")
	for ti, tt := range []struct {
		name, tz string
		loc      *time.Location
		at       time.Time
		unit     counting.Kind
		ownZone  bool // the item's zone (a campaign's), the counter's UTC
	}{
		{"end of the 169 h week", "America/New_York", ny, time.Date(2026, 11, 1, 23, 59, 58, 800_000_000, ny), counting.Week, false},
		{"end of November", "Asia/Shanghai", sh, time.Date(2026, 11, 30, 23, 59, 58, 800_000_000, sh), counting.Month, false},
		{"a campaign's 169 h week", "America/New_York", ny, time.Date(2026, 11, 1, 23, 59, 58, 800_000_000, ny), counting.Week, true},
		{"a campaign's day", "Asia/Shanghai", sh, time.Date(2026, 11, 30, 23, 59, 58, 800_000_000, sh), counting.Day, true},
		{"a campaign's lifetime", "UTC", time.UTC, time.Date(2027, 3, 14, 9, 26, 53, 800_000_000, time.UTC), counting.Lifetime, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			counterTZ, itemZone := tt.tz, ""
			if tt.ownZone {
				counterTZ, itemZone = "UTC", tt.tz
			}
			s := testSettings(t, srv.URL(), "COUNTER_TIMEZONE="+counterTZ)
			clk := newRealClock(tt.at)
			st := newTestStore(t, srv.URL(), s, clk.Now)
			t.Cleanup(st.Close)
			rng := rand.New(rand.NewPCG(uint64(ti), 7))
			m := &windowModel{}
			it := counting.Item{Scope: counting.Scope{Campaign: "c" + strconv.Itoa(ti), Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "d"},
				Spec: counting.Spec{Kind: tt.unit, Span: 1, Zone: itemZone}}
			if tt.unit == counting.Lifetime {
				it.Spec.Span = tt.at.Add(1200 * time.Millisecond).Unix() // the campaign's end
			}
			const guard = 100 // ms either side of the end, as in TestWindowsAgreeWithModel
			var late int64    // see callSpan.trail
			end := time.Now().Add(2500 * time.Millisecond)
			compared, crossed := 0, false
			for time.Now().Before(end) {
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond) // pace of the stream, not a wait
				write := rng.IntN(3) > 0
				w := it
				if write {
					w.Hits = int64(1 + rng.IntN(3))
				}
				var got counting.Result
				sp := clk.begin()
				if write {
					got = writeOne(t, st.Store, w)
				} else {
					got = readOne(t, st.Store, w)
				}
				t0 := sp.end()
				nowMs := t0.UnixMilli()
				var periodEnd int64
				if tt.unit == counting.Lifetime {
					// Until the end; a hit after it lasts a millisecond.
					periodEnd = max(it.Spec.Span*1000, nowMs+1)
				} else {
					periodEnd = modelPeriodEnd(t0, tt.loc, tt.unit).UnixMilli()
				}
				crossed = crossed || t0.After(tt.at.Add(1200*time.Millisecond))
				want, endMs := m.count, m.endMs // the end before this hit moves it
				near := sp.near(endMs, guard+late)
				if !m.live(nowMs) {
					want = 0
				}
				if write {
					late = sp.trail(late, !m.live(nowMs))
					want = m.hit(nowMs, w.Hits, periodEnd)
				}
				if near {
					if write { // either side may have won the race: follow Redis
						m.count, m.endMs = got.Count, nowMs+got.TTLMs
					}
					continue
				}
				compared++
				if got.Count != want || got.Code == 0 && !sp.fits(got.TTLMs, periodEnd, guard+late) {
					t.Fatalf("%s at %s: %+v, model count %d, period ends %s", map[bool]string{true: "hit", false: "read"}[write],
						t0.In(tt.loc), got, want, time.UnixMilli(periodEnd).In(tt.loc))
				}
			}
			if compared < 20 || !crossed {
				t.Fatalf("only %d decisions compared (crossed the end: %v)", compared, crossed)
			}
		})
	}
}

// Event ids remembered before week and month took bits 4 and 8 (scores
// of unix ms * 4 + bits) still answer "counted before" after the upgrade,
// and are pruned by their own scale once older than the dedupe TTL.
func TestEventIDsOfTheOldScoreScaleStillDedupe(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	v, s := testStore(t, srv, clk)
	c := newClient(t, srv.URL())
	it := counting.Item{Scope: counting.Scope{Campaign: "up", Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "d"},
		Spec: counting.Spec{Kind: counting.Day, Span: 1}, Hits: 1}
	nowMs := clk.Now().UnixMilli()
	stale := nowMs - s.DedupeTTL.Milliseconds() - 1000
	// "old-1" counted on the day (bit 1) a second ago, "old-2" long ago.
	if err := raw(t, c, "ZADD", core.Dedupe(&it), strconv.FormatInt((nowMs-1000)*4+1, 10), "old-1", strconv.FormatInt(stale*4+1, 10), "old-2").Error(); err != nil {
		t.Fatal(err)
	}
	raw(t, c, "SET", core.Window(&it), "1")
	it.EventID = "old-1"
	if r := writeOne(t, v.Store, it); !r.Duplicate || r.Count != 1 {
		t.Errorf("a replay of an id counted before the upgrade: %+v, want a duplicate of count 1", r)
	}
	it.EventID = "new-1"
	if r := writeOne(t, v.Store, it); r.Duplicate || r.Count != 2 {
		t.Errorf("a new id: %+v, want count 2", r)
	}
	if n, _ := raw(t, c, "ZSCORE", core.Dedupe(&it), "old-2").ToString(); n != "" {
		t.Errorf("an id older than the dedupe TTL is still remembered after a run at a multiple of 16 ms: score %s", n)
	}
	// An id older than the TTL and not pruned yet counts as never seen.
	clk.Add(time.Millisecond) // no prune on this run
	raw(t, c, "ZADD", core.Dedupe(&it), strconv.FormatInt(stale*1024+1, 10), "old-3")
	it.EventID = "old-3"
	if r := writeOne(t, v.Store, it); r.Duplicate || r.Count != 3 {
		t.Errorf("an id counted longer ago than the dedupe TTL: %+v, want counted (count 3)", r)
	}
	it.Spec = counting.Spec{Kind: counting.Week, Span: 1}
	it.EventID = "old-1"
	if r := writeOne(t, v.Store, it); r.Duplicate || r.Count != 1 {
		t.Errorf("the old id on the week, a counter it never counted on: %+v, want counted once", r)
	}
}
