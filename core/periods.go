package core

import (
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// periodsKind is "this natural period and the N-1 before" (days, weeks
// from Monday, calendar months) in the item's zone, from period buckets:
// the Hash pfreq:{<tag>}:<kind>, field = the period's index (days since
// 1970-01-01 in the zone, weeks since the Monday before it, year*12 +
// month-1). A write keeps Spec.Keep periods (the longest its caps read,
// never fewer than its span) and expires at the end of the last of them.
// Its own parts of lua/count.lua (days.lua, weeks.lua, months.lua).
type periodsKind struct{ unit counting.Kind }

// MaxPeriods is the most periods of each kind a counter keeps.
var MaxPeriods = map[counting.Kind]int64{counting.Days: 90, counting.Weeks: 52, counting.Months: 24}

func (k periodsKind) check(it *counting.Item, _ *Limits, field string) error {
	most := MaxPeriods[k.unit]
	switch {
	case it.Scope.Campaign == "":
		return apierr.Invalid("%sspec.kind %s counts campaign events only", field, k.unit)
	case it.Spec.Span < 1 || it.Spec.Span > most:
		return apierr.Invalid("%sspec.span must be between 1 and %d %s", field, most, k.unit)
	case it.Spec.Keep < 0 || it.Spec.Keep > most:
		return apierr.Invalid("%sspec.keep must be between 0 and %d %s", field, most, k.unit)
	}
	return nil
}

func (periodsKind) zoned() bool { return true }

func (k periodsKind) partName() string { return string(k.unit) }

// index is the index of now's period in loc, and the start of the period
// n after it.
func (k periodsKind) index(now time.Time, loc *time.Location, n int) (int64, time.Time) {
	l := now.In(loc)
	y, m, d := l.Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400 // 1970-01-01 is a Thursday
	switch k.unit {
	case counting.Weeks:
		monday := d - (int(l.Weekday())+6)%7
		return (day + 3) / 7, time.Date(y, m, monday+7*n, 0, 0, 0, 0, loc)
	case counting.Months:
		return int64(y)*12 + int64(m) - 1, time.Date(y, m+time.Month(n), 1, 0, 0, 0, 0, loc)
	}
	return day, time.Date(y, m, d+n, 0, 0, 0, 0, loc)
}

// Periods is the Hash of a counter's period buckets of the item's kind.
func Periods(it *counting.Item) string { return Tagged("pfreq:", it) + ":" + string(it.Spec.Kind) }

func (k periodsKind) write(it *counting.Item, e *env) writing {
	keep := max(it.Spec.Keep, it.Spec.Span)
	i, end := k.index(e.now, e.zone(it), int(keep))
	return writing{part: k.partName(), keys: []string{Periods(it)}, args: []string{
		strconv.FormatInt(i, 10),
		strconv.FormatInt(keep, 10),
		strconv.FormatInt(it.Spec.Span, 10),
		strconv.FormatInt(ceilMs(end.Sub(e.now)).Milliseconds(), 10),
	}}
}

func (k periodsKind) wrote(it *counting.Item, _ *env, v []int64, r *counting.Result) error {
	return wroteBuckets(string(k.unit), it, v, r)
}

func (periodsKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	// The whole hash: its answer does not depend on the period, so a
	// cached copy serves every span, now and in the next period.
	return e.one(e.read("HGETALL", Periods(it))), true
}

func (k periodsKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	bs, err := hourBuckets(rs)
	if err != nil {
		return err
	}
	i, end := k.index(e.now, e.zone(it), 1)
	r.Count = sumHours(bs, i, it.Spec.Span)
	r.TTLMs = ceilMs(end.Sub(e.now)).Milliseconds()
	return nil
}
