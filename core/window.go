package core

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// windowKind is a String with a TTL, opened by the first hit: kinds day
// (natural days) and seconds. A campaign's day counter is freq:{<tag>}, a
// business's window gfreq:{<tag>}; a business key has one live window
// whatever the unit, as the frequency-control API defines it, and an Add with another span counts
// into the live window without moving its end.
type windowKind struct{ unit counting.Kind }

func (k windowKind) check(it *counting.Item, lim *Limits, field string) error {
	span := it.Spec.Span
	switch {
	case it.Scope.Campaign != "" && (k.unit != counting.Day || span != 1):
		return apierr.Invalid("%sspec: campaign counters count natural days with span 1 (today)", field)
	case it.Hits == 0 && span == 0:
		return nil // a read of whatever window is live
	case k.unit == counting.Day && (span < 1 || span > int64(lim.MaxDays)):
		return apierr.Invalid("%sspec.span must be between 1 and %d days", field, lim.MaxDays)
	case k.unit == counting.Seconds && (span < 1 || span > int64(lim.MaxSeconds)):
		return apierr.Invalid("%sspec.span must be between 1 and %d seconds", field, lim.MaxSeconds)
	}
	return nil
}

// windowEnd is when a window of the item's span opened now ends.
func (k windowKind) windowEnd(it *counting.Item, e *env) time.Time {
	if k.unit == counting.Seconds {
		return e.now.Add(time.Duration(it.Spec.Span) * time.Second)
	}
	return dayEnd(e.now, e.zone(it), int(it.Spec.Span))
}

// dayEnd is the end of the n-th natural day in loc counting now's day,
// built from the calendar, so DST days last 23 or 25 h.
func dayEnd(now time.Time, loc *time.Location, n int) time.Time {
	l := now.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day()+n, 0, 0, 0, 0, loc)
}

// dayTTL is the time left until the end of now's day in loc, rounded up to
// whole milliseconds: the TTL never ends before the day does, and an event
// in the day's last instant still gets a positive one.
func dayTTL(now time.Time, loc *time.Location) time.Duration {
	return ceilMs(dayEnd(now, loc, 1).Sub(now))
}

// dayBounds are the start and end of one day in one zone: every read of
// a campaign's day answers the time left of it, and a day's bounds cost a
// calendar computation that the reads of a day can share.
type dayBounds struct {
	loc        *time.Location
	start, end time.Time
}

// dayTTL is dayTTL of the env's now in loc, through the store's last
// day bounds when loc is the store's zone. A campaign's own zone is
// computed each time: reads mixing zones would otherwise replace the
// shared bounds at every turn.
func (e *env) dayTTL(loc *time.Location) time.Duration {
	if e.today == nil || loc != e.loc {
		return dayTTL(e.now, loc)
	}
	d := e.today.Load()
	if d == nil || d.loc != loc || e.now.Before(d.start) || !e.now.Before(d.end) {
		d = &dayBounds{loc: loc, start: dayEnd(e.now, loc, 0), end: dayEnd(e.now, loc, 1)}
		e.today.Store(d)
	}
	return ceilMs(d.end.Sub(e.now))
}

// ceilMs rounds d up to whole milliseconds: a TTL never ends before its
// window does.
func ceilMs(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// zoned says a day counts natural days, in a zone.
func (k windowKind) zoned() bool { return k.unit == counting.Day }

// partName is the kind's part of lua/count.lua (window.lua).
func (windowKind) partName() string { return "window" }

func (k windowKind) write(it *counting.Item, e *env) writing {
	// Relative to the counter's clock, rounded up to the millisecond as
	// dayTTL is: the window never ends before its span does.
	ttl := ceilMs(k.windowEnd(it, e).Sub(e.now))
	return writing{part: k.partName(), keys: []string{Window(it)}, args: []string{strconv.FormatInt(ttl.Milliseconds(), 10)}}
}

func (k windowKind) wrote(it *counting.Item, e *env, v []int64, r *counting.Result) error {
	if len(v) != 3 {
		return fmt.Errorf("window part returned %d values", len(v))
	}
	r.Count, r.Duplicate = v[0], v[2] == 1
	r.TTLMs = max(v[1], 0)
	return nil
}

func (k windowKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	return readWindow(e, it)
}

// appendLocalName: a campaign day's GET; a seconds window's read is two
// commands and not cached.
func (k windowKind) appendLocalName(b []byte, it *counting.Item) ([]byte, bool) {
	if it.Scope.Campaign == "" {
		return b, false
	}
	return append(AppendTagged(b, "freq:", it), "GET"...), true
}

func (k windowKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	if err := gotWindow(rs, r); err != nil || r.Code != apierr.OK {
		return err
	}
	if len(rs) == 1 {
		// A campaign's day: the TTL is the time left today.
		r.TTLMs = e.dayTTL(e.zone(it)).Milliseconds()
	}
	return nil
}

// readWindow is the commands that read a day or seconds counter; cacheable
// is false when a cached answer would be wrong.
func readWindow(e *env, it *counting.Item) (cmds []rueidis.Cacheable, cacheable bool) {
	key := Window(it)
	get := e.read("GET", key)
	if it.Scope.Campaign != "" {
		// A campaign's day window always ends at the end of today.
		return e.one(get), true
	}
	// The TTL shrinks every millisecond: a cached one would be wrong.
	return e.two(get, e.read("PTTL", key)), false
}

// gotWindow decodes ReadWindow's answers: the count, and the TTL when it
// was read. A counter with no live window answers KeyNotFound and 0.
func gotWindow(rs []rueidis.RedisResult, r *counting.Result) error {
	n, err := rs[0].AsInt64()
	if rueidis.IsRedisNil(err) {
		r.Code, r.Msg = apierr.KeyNotFound, "no live window"
		return nil
	}
	if err != nil {
		return err
	}
	r.Count = n
	if len(rs) == 1 {
		return nil
	}
	ttl, err := rs[1].AsInt64()
	if err != nil {
		return err
	}
	r.TTLMs = max(ttl, 0)
	return nil
}
