package core

import (
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// lifetimeKind is a campaign's lifetime: a String with a TTL to the
// campaign's end, freq:{<tag>}:lifetime, opened by the first hit. Span is
// the end, in unix seconds; a hit after it counts nothing that lasts. Its
// own part of lua/count.lua (lifetime.lua).
type lifetimeKind struct{}

func (lifetimeKind) check(it *counting.Item, _ *Limits, field string) error {
	switch {
	case it.Scope.Campaign == "":
		return apierr.Invalid("%sspec.kind lifetime counts campaign events only", field)
	case it.Spec.Span < 1:
		return apierr.Invalid("%sspec.span must be the lifetime's end, in unix seconds", field)
	}
	return nil
}

// ttl is the time left until the end, rounded up to the millisecond; at
// least a millisecond (an ended lifetime keeps nothing).
func (lifetimeKind) ttl(it *counting.Item, e *env) time.Duration {
	return max(ceilMs(time.Unix(it.Spec.Span, 0).Sub(e.now)), time.Millisecond)
}

func (lifetimeKind) partName() string { return string(counting.Lifetime) }

func (k lifetimeKind) write(it *counting.Item, e *env) writing {
	return writing{part: k.partName(), keys: []string{Natural(it)}, args: []string{strconv.FormatInt(k.ttl(it, e).Milliseconds(), 10)}}
}

// wrote decodes what window.lua's run answers, as a day's.
func (lifetimeKind) wrote(it *counting.Item, e *env, v []int64, r *counting.Result) error {
	return windowKind{unit: counting.Lifetime}.wrote(it, e, v, r)
}

func (lifetimeKind) read(it *counting.Item, e *env) ([]rueidis.Cacheable, bool) {
	// The lifetime ends at its end: a cached count is right.
	return e.one(e.read("GET", Natural(it))), true
}

func (k lifetimeKind) got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error {
	if err := gotWindow(rs, r); err != nil || r.Code != apierr.OK {
		return err
	}
	r.TTLMs = k.ttl(it, e).Milliseconds()
	return nil
}
