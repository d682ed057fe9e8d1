package core

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/lua"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

var (
	slidingScript = newScript(lua.Sliding)
	unpaceScript  = newScript(lua.Unpace)
)

// slidingKind is an exact sliding window: the ZSet sfreq:{<tag>}:<spanSec>,
// member = event id, score = unix ms. The span is part of the key, so each
// window keeps exactly its own events and no writer trims another's.
type slidingKind struct{}

func (slidingKind) check(it *counting.Item, lim *Limits, field string) error {
	s := it.Spec
	switch {
	case s.Span < 1 || s.Span > int64(lim.MaxSliding):
		return apierr.Invalid("%sspec.span must be between 1 and %d seconds", field, lim.MaxSliding)
	case it.Hits > 1:
		return apierr.Invalid("%shits must be 0 or 1 for a sliding window (one event per event id)", field)
	case s.Limit < 0 || s.Limit > maxLimit:
		return apierr.Invalid("%sspec.limit must be between 0 and %d", field, maxLimit)
	case s.MinGapSec < 0 || s.MinGapSec > s.Span:
		return apierr.Invalid("%sspec.minGapSec must be between 0 and the span (%d)", field, s.Span)
	case s.MinGapSec > 0 && s.Limit == 0:
		return apierr.Invalid("%sspec.minGapSec needs a limit", field)
	}
	return nil
}

// member is the event's id in the window; an event without one gets a
// random id, so it counts once and only once.
func member(it *counting.Item) string {
	if it.EventID == "" {
		it.EventID = ids.Random("r-")
	}
	return it.EventID
}

func (slidingKind) write(it *counting.Item, e *env) writing {
	return writing{script: slidingScript, keys: []string{Sliding(it)}, args: []string{
		strconv.FormatInt(e.now.UnixMilli(), 10),
		strconv.FormatInt(it.Spec.Span*1000, 10),
		strconv.FormatInt(it.Spec.Limit, 10),
		strconv.FormatInt(it.Spec.MinGapSec*1000, 10),
		member(it),
	}}
}

func (slidingKind) wrote(_ *counting.Item, _ *env, v []int64, r *counting.Result) error {
	if len(v) != 5 {
		return fmt.Errorf("sliding script returned %d values", len(v))
	}
	r.Count, r.LastAt, r.Duplicate = v[1], v[2], v[3] == 1
	switch v[0] {
	case counting.PaceOverLimit:
		r.Allowed, r.Reason = false, counting.OverLimit
	case counting.PaceTooSoon:
		r.Allowed, r.Reason = false, counting.TooSoon
	}
	return nil
}

func (slidingKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	return readSliding(e, it, e.now.UnixMilli()), false
}

func (slidingKind) got(_ *counting.Item, _ *env, rs []rueidis.RedisResult, r *counting.Result) error {
	return gotSliding(rs, r)
}

// Undo takes back an event that a write of a sliding window recorded at
// atMs, when the request it belonged to was refused elsewhere
// (all-or-nothing across counters that may live in different Cluster
// slots).
func (s *Store) Undo(ctx context.Context, it *counting.Item, atMs int64) error {
	return unpaceScript.Exec(ctx, s.rdb, []string{Sliding(it)}, []string{it.EventID, strconv.FormatInt(atMs, 10)}).Error()
}

// readSliding is the commands that read an exact window at nowMs: its
// count and its newest event. Its bounds move every millisecond, so it is
// never cached.
func readSliding(e *env, it *counting.Item, nowMs int64) []rueidis.Cacheable {
	k := Sliding(it)
	from := strconv.FormatInt(nowMs-it.Spec.Span*1000, 10)
	return e.two(
		e.read("ZCOUNT", k, from, "+inf"),
		// The newest event still in the window; an older one is forgotten.
		e.read("ZRANGE", k, "+inf", from, "BYSCORE", "REV", "LIMIT", "0", "1", "WITHSCORES"),
	)
}

// gotSliding decodes ReadSliding's answers: the count and LastAt.
func gotSliding(rs []rueidis.RedisResult, r *counting.Result) error {
	n, err := rs[0].AsInt64()
	if err != nil {
		return err
	}
	zs, err := rs[1].AsZScores()
	if err != nil {
		return err
	}
	r.Count = n
	if len(zs) > 0 {
		r.LastAt = int64(zs[0].Score)
	}
	return nil
}
