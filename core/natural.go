package core

import (
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// naturalKind is a campaign's natural week (Monday to Sunday) or calendar
// month in the counter's zone: a String with a TTL to the period's end,
// freq:{<tag>}:week or freq:{<tag>}:month, opened by the first hit, as a
// day is. Its own part of lua/count.lua (week.lua, month.lua), so its
// event-id bit is its own.
type naturalKind struct{ unit counting.Kind }

func (k naturalKind) check(it *counting.Item, _ *Limits, field string) error {
	switch {
	case it.Scope.Campaign == "":
		return apierr.Invalid("%sspec.kind %s counts campaign events only", field, k.unit)
	case it.Spec.Span != 1:
		return apierr.Invalid("%sspec.span must be 1 (this %s)", field, k.unit)
	}
	return nil
}

// periodEnd is the end of now's week (the next Monday 00:00) or month
// (the first of the next) in loc, from the calendar: a week with a DST
// change lasts 167 or 169 hours.
func periodEnd(unit counting.Kind, now time.Time, loc *time.Location) time.Time {
	l := now.In(loc)
	if unit == counting.Month {
		return time.Date(l.Year(), l.Month()+1, 1, 0, 0, 0, 0, loc)
	}
	days := 7 - (int(l.Weekday())+6)%7 // Monday 7, Sunday 1
	return time.Date(l.Year(), l.Month(), l.Day()+days, 0, 0, 0, 0, loc)
}

// ttl is the time left of now's period in the item's zone, rounded up to
// the millisecond.
func (k naturalKind) ttl(it *counting.Item, e *env) time.Duration {
	return ceilMs(periodEnd(k.unit, e.now, e.zone(it)).Sub(e.now))
}

func (naturalKind) zoned() bool { return true }

func (k naturalKind) partName() string { return string(k.unit) }

func (k naturalKind) write(it *counting.Item, e *env) writing {
	return writing{part: k.partName(), keys: []string{Natural(it)}, args: []string{strconv.FormatInt(k.ttl(it, e).Milliseconds(), 10)}}
}

// wrote decodes what window.lua's run answers, as a day's.
func (k naturalKind) wrote(it *counting.Item, e *env, v []int64, r *counting.Result) error {
	return windowKind{unit: k.unit}.wrote(it, e, v, r)
}

func (k naturalKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	// The period always ends at its calendar end: a cached count is right.
	return e.one(e.read("GET", Natural(it))), true
}

func (k naturalKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	if err := gotWindow(rs, r); err != nil || r.Code != apierr.OK {
		return err
	}
	r.TTLMs = k.ttl(it, e).Milliseconds()
	return nil
}

// Natural is the String of a campaign's week, month or lifetime counter.
func Natural(it *counting.Item) string { return Window(it) + ":" + string(it.Spec.Kind) }
