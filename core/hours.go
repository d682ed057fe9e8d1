package core

import (
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
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

// partName is the kind's part of lua/count.lua (hours.lua).
func (hoursKind) partName() string { return "hours" }

// write sends days.lua's arguments (hours.lua runs it): every writer
// keeps R+1 hours, R the counter's largest window, for as long.
func (k hoursKind) write(it *counting.Item, e *env) writing {
	keep := int64(e.retention) + 1
	return writing{part: k.partName(), keys: []string{Hours(it)}, args: []string{
		strconv.FormatInt(e.hour, 10),
		strconv.FormatInt(keep, 10),
		strconv.FormatInt(it.Spec.Span, 10),
		strconv.FormatInt(keep*3_600_000, 10),
	}}
}

func (hoursKind) wrote(it *counting.Item, _ *env, v []int64, r *counting.Result) error {
	return wroteBuckets("hours", it, v, r)
}

// wroteBuckets decodes a bucket part's answer: the sum and whether the
// event was counted before.
func wroteBuckets(part string, _ *counting.Item, v []int64, r *counting.Result) error {
	if len(v) != 2 {
		return fmt.Errorf("%s part returned %d values", part, len(v))
	}
	r.Count, r.Duplicate = v[0], v[1] == 1
	return nil
}

// read is the command that reads a counter's hour buckets: the whole hash,
// which holds only the hours that had events (at most R+1 of them). It does
// not depend on the hour or the window, so one answer (and one cached copy)
// serves every window of the counter, this hour and the next.
func (hoursKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	return e.one(e.read("HGETALL", Hours(it))), true
}

func (hoursKind) appendLocalName(b []byte, it *counting.Item) ([]byte, bool) {
	return append(AppendTagged(b, "hfreq:", it), "HGETALL"...), true
}

func (hoursKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	return e.hoursMemo.Got(rs, e.hour, it.Spec.Span, r)
}

// bucket is one hour bucket of a counter: its epoch hour and count.
type bucket struct{ Hour, N int64 }

// hourBuckets decodes ReadHours's answer into its buckets, decoded once
// for all the windows of a counter.
func hourBuckets(rs []rueidis.RedisResult) ([]bucket, error) {
	m, err := rs[0].AsIntMap()
	if err != nil {
		return nil, err
	}
	out := make([]bucket, 0, len(m))
	for f, n := range m {
		h, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hour bucket %q: %w", f, err)
		}
		out = append(out, bucket{h, n})
	}
	return out, nil
}

// sumHours is the sum of the buckets of the span hours up to hour.
func sumHours(bs []bucket, hour, span int64) int64 {
	var sum int64
	for _, b := range bs {
		if b.Hour > hour-span && b.Hour <= hour {
			sum += b.N
		}
	}
	return sum
}

// hoursMemo decodes the answer the windows of one counter share once:
// consecutive windows read the same result.
type hoursMemo struct {
	at      *rueidis.RedisResult
	buckets []bucket
	err     error
}

// decoded makes bs the buckets of the answer at, when bs is not nil: a
// cached answer the local cache decoded when it came.
func (m *hoursMemo) decoded(at *rueidis.RedisResult, bs []bucket) {
	if bs != nil {
		m.at, m.buckets, m.err = at, bs, nil
	}
}

// Got sets r.Count to the sum of the span hours up to hour of
// ReadHours's answer rs.
func (m *hoursMemo) Got(rs []rueidis.RedisResult, hour, span int64, r *counting.Result) error {
	if m.at != &rs[0] {
		m.at = &rs[0]
		m.buckets, m.err = hourBuckets(rs)
	}
	if m.err != nil {
		return m.err
	}
	r.Count = sumHours(m.buckets, hour, span)
	return nil
}
