package core

import (
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/keyspace"
)

// hoursKind is "the last N hours" from hour buckets: the Hash
// hfreq:{<tag>}, field = epoch hour. Retention is the counter's
// configuration (COUNTER_MAX_WINDOW_HOURS), never the writer's window: every
// write keeps that many hours, so any window a read may ask for is whole.
type hoursKind struct{}

func (hoursKind) check(it *counting.Item, lim *Limits, field string) error {
	if it.Spec.Span < 1 || it.Spec.Span > int64(lim.MaxHours) {
		return apierr.Invalid("%sspec.span must be between 1 and %d hours (the hours kept, COUNTER_MAX_WINDOW_HOURS)", field, lim.MaxHours)
	}
	return nil
}

func (hoursKind) write(it *counting.Item, e *env) writing {
	return writing{part: "hours", keys: []string{keyspace.Hours(it)}, args: []string{
		strconv.FormatInt(e.hour, 10),
		strconv.Itoa(e.retention),
		strconv.FormatInt(it.Spec.Span, 10),
	}}
}

func (hoursKind) wrote(_ *counting.Item, _ *env, v []int64, r *counting.Result) error {
	if len(v) != 2 {
		return fmt.Errorf("hours part returned %d values", len(v))
	}
	r.Count, r.Duplicate = v[0], v[1] == 1
	return nil
}

func (hoursKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	return []rueidis.Cacheable{keyspace.ReadHours(e.b, it)}, true
}

func (hoursKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	return e.hoursMemo.Got(rs, e.hour, it.Spec.Span, r)
}
