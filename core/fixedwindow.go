package core

import (
	"strconv"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
)

// fixedWindow: Limit per period in windows aligned to the epoch; a period
// of exactly 24h is the natural day in COUNTER_TIMEZONE. Each window is its
// own String (its start in the key), gone when the window ends.
var fixedWindow = limiterKind{
	name: counting.FixedWindow,
	args: func(dst []string, s *counting.Spec, e *env) ([]string, string) {
		start, end := fixedWindowBounds(e.now, e.loc, s.PeriodMs)
		return append(dst, strconv.FormatInt(s.Limit, 10), strconv.FormatInt(end, 10)), ":" + strconv.FormatInt(start, 10)
	},
}

// fixedWindowBounds is the window holding now: unix ms of its start and end.
func fixedWindowBounds(now time.Time, loc *time.Location, periodMs int64) (int64, int64) {
	if periodMs == 24*3600*1000 {
		l := now.In(loc)
		start := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc)
		return start.UnixMilli(), dayEnd(now, loc, 1).UnixMilli()
	}
	start := now.UnixMilli() / periodMs * periodMs
	return start, start + periodMs
}
