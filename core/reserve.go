package core

import (
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// reserveKind holds in-flight bids: the ZSet rsv:{<tag>}, member = the bid
// id (the item's event id, which its win notice carries), score = when it
// expires. A write reserves for Span milliseconds; a read answers how many
// are live. releaseKind (kind release) ends one: counted in the same run
// as the bid's win (the same tag and event id), the reservation turns
// into the count exactly once. Parts of lua/count.lua (reserve.lua,
// release.lua), bits of their own.
type reserveKind struct{ release bool }

// MaxReserveMs bounds how long a bid stays reserved.
const MaxReserveMs = 3_600_000

func (k reserveKind) check(it *counting.Item, _ *Limits, field string) error {
	switch {
	case it.Scope.Campaign == "":
		return apierr.Invalid("%sspec.kind %s holds campaign bids only", field, k.name())
	case it.Hits > 1:
		return apierr.Invalid("%shits must be 0 or 1: one bid per bid id", field)
	case it.Hits == 1 && it.EventID == "":
		return apierr.Invalid("%seventId (the bid id) is required", field)
	case !k.release && it.Hits == 1 && (it.Spec.Span < 1 || it.Spec.Span > MaxReserveMs):
		return apierr.Invalid("%sspec.span must be the reservation's milliseconds, 1 to %d", field, MaxReserveMs)
	}
	return nil
}

func (k reserveKind) name() counting.Kind {
	if k.release {
		return counting.Release
	}
	return counting.Reserve
}

func (k reserveKind) partName() string { return string(k.name()) }

// Reserved is the ZSet of a counter's in-flight bids.
func Reserved(it *counting.Item) string { return Tagged("rsv:", it) }

func (k reserveKind) write(it *counting.Item, e *env) writing {
	now := strconv.FormatInt(e.now.UnixMilli(), 10)
	if k.release {
		// The bid id is the event id, which count.lua passes: every win
		// of a counter has the same arguments and shares its run.
		return writing{part: k.partName(), keys: []string{Reserved(it)}, args: []string{now}}
	}
	args := []string{now, it.EventID, strconv.FormatInt(it.Spec.Span, 10)}
	return writing{part: k.partName(), keys: []string{Reserved(it)}, args: args}
}

func (reserveKind) wrote(_ *counting.Item, _ *env, v []int64, r *counting.Result) error {
	if len(v) != 2 {
		return fmt.Errorf("reserve part returned %d values", len(v))
	}
	r.Count, r.Duplicate = v[0], v[1] == 1
	return nil
}

func (reserveKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	// The whole set: the live ones are counted at the read's instant, so
	// a cached copy stays right as members expire.
	return e.one(e.read("ZRANGE", Reserved(it), "0", "-1", "WITHSCORES")), true
}

func (reserveKind) got(_ *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	zs, err := rs[0].AsZScores()
	if err != nil {
		return err
	}
	now := float64(e.now.UnixMilli())
	for _, z := range zs {
		if z.Score > now {
			r.Count++
		}
	}
	return nil
}
