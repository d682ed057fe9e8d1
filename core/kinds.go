package core

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // campaigns' zones load in any process, on images without a zoneinfo database too

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/counting"
)

// kind is one kind of counter: its keys, the script that counts, the
// commands that read, and the decoding of both. The store knows none of
// them; it looks each item's kind up in kinds.
type kind interface {
	// check validates the item's spec and hits against the limits; it
	// returns the message of a 400 with the field under field (e.g.
	// "items[2].").
	check(it *counting.Item, lim *Limits, field string) error
	// write is how the item's hits are counted.
	write(it *counting.Item, e *env) writing
	// wrote decodes the script's (or the part's) answer into r.
	wrote(it *counting.Item, e *env, v []int64, r *counting.Result) error
	// read is the commands that read the item (e.one or e.two: valid until
	// the next read with e); cacheable is false when a cached answer would
	// be wrong (a window whose bounds move every ms).
	read(it *counting.Item, e *env) (cmds []rueidis.Cacheable, cacheable bool)
	// got decodes the answers of read's commands, in their order, into r.
	got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error
}

// kindOf is the kind named k, nil for none. The read and write paths look
// each item's kind up (a read three times: its commands, its cached name,
// its answer): a switch on the name is a few comparisons, where a map
// hashed it (about 140 instructions a lookup).
func kindOf(k counting.Kind) kind {
	switch k {
	case counting.Day:
		return dayKind
	case counting.Seconds:
		return secondsKind
	case counting.Hours:
		return hoursKindOf
	case counting.Days:
		return daysKind
	case counting.Week:
		return weekKind
	case counting.Month:
		return monthKind
	case counting.Lifetime:
		return lifetimeKindOf
	case counting.Weeks:
		return weeksKind
	case counting.Months:
		return monthsKind
	case counting.Reserve:
		return reserveKindOf
	case counting.Release:
		return releaseKind
	case counting.Sliding:
		return slidingKindOf
	case counting.FixedWindow:
		return fixedWindowKind
	case counting.SlidingLog:
		return slidingLogKind
	case counting.SlidingWindow:
		return slidingWindowKind
	case counting.LeakyBucket:
		return leakyBucketKind
	case counting.TokenBucket:
		return tokenBucketKind
	case counting.GCRA:
		return gcraKind
	}
	return nil
}

// The kinds kindOf answers, each made an interface value once (a
// struct returned as one would be copied to the heap on every lookup).
var (
	dayKind        kind = windowKind{unit: counting.Day}
	secondsKind    kind = windowKind{unit: counting.Seconds}
	hoursKindOf    kind = hoursKind{}
	daysKind       kind = periodsKind{unit: counting.Days}
	weekKind       kind = naturalKind{unit: counting.Week}
	monthKind      kind = naturalKind{unit: counting.Month}
	lifetimeKindOf kind = lifetimeKind{}
	weeksKind      kind = periodsKind{unit: counting.Weeks}
	monthsKind     kind = periodsKind{unit: counting.Months}
	reserveKindOf  kind = reserveKind{}
	releaseKind    kind = reserveKind{release: true}
	slidingKindOf  kind = slidingKind{}

	fixedWindowKind   kind = fixedWindow
	slidingLogKind    kind = slidingLog
	slidingWindowKind kind = slidingWindow
	leakyBucketKind   kind = leakyBucket
	tokenBucketKind   kind = tokenBucket
	gcraKind          kind = gcra
)

// kinds is every kind of counter the counter serves, by name (kindOf).
var kinds = func() map[counting.Kind]kind {
	m := map[counting.Kind]kind{}
	for _, k := range []counting.Kind{
		counting.Day, counting.Seconds, counting.Hours, counting.Days, counting.Week, counting.Month, counting.Lifetime,
		counting.Weeks, counting.Months, counting.Reserve, counting.Release, counting.Sliding,
		counting.FixedWindow, counting.SlidingLog, counting.SlidingWindow, counting.LeakyBucket, counting.TokenBucket, counting.GCRA,
	} {
		m[k] = kindOf(k)
	}
	return m
}()

// writing is how one item's hits are counted: a run of a script of the
// kind's own, or a part of lua/count.lua (part set, one key), which the
// store runs in one script run, with one event-id check, together with the
// other parts of the item's tag that the same event counts on.
type writing struct {
	script     *script
	fn         *function // instead of script: a function of the library
	part       string
	keys, args []string
}

// env is what kinds build commands from for one store call: the instant,
// the zone, and the settings that decide retention.
// zone is the zone of the item's natural periods: its own (Spec.Zone),
// else the store's.
func (e *env) zone(it *counting.Item) *time.Location {
	if it.Spec.Zone == "" {
		return e.loc
	}
	if loc, err := LoadZone(it.Spec.Zone); err == nil {
		return loc
	}
	return e.loc // validated before: not reached
}

// zones are the zones LoadZone loaded, by name.
var zones sync.Map

// LoadZone loads an IANA zone by name (Europe/Paris), once per name.
func LoadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil || name == "" || name == "Local" {
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as Europe/Paris", name)
	}
	zones.Store(name, loc)
	return loc, nil
}

type env struct {
	b         rueidis.Builder
	now       time.Time
	loc       *time.Location
	hour      int64 // epoch hour of now
	dedupeTTL time.Duration
	retention int       // hours every hour hash keeps
	hoursMemo hoursMemo // the hour buckets of the counter read last
	today     *atomic.Pointer[dayBounds]
	// cmds holds the commands a kind's read answers, until the plan has
	// copied them: no slice is made per item read.
	cmds [2]rueidis.Cacheable
	// cluster: Redis is a cluster, and each command goes to the node of
	// its key's slot.
	cluster bool
}

// read is the read command name key args..., cacheable. rueidis computes
// a key's slot (a CRC16 of its hash tag, about 130 ns for a device's) for
// every key given as a key; only a cluster routes by it, so elsewhere the
// key goes as an argument, and the plan gives the first command of a
// pipeline its slot (rueidis picks one of its connections by it).
func (e *env) read(name, key string, args ...string) rueidis.Cacheable {
	c := e.b.Arbitrary(name)
	if e.cluster {
		c = c.Keys(key)
	} else {
		c = c.Args(key)
	}
	return rueidis.Cacheable(c.Args(args...).ReadOnly())
}

// one is the read of the one command c, in e's cmds.
func (e *env) one(c rueidis.Cacheable) []rueidis.Cacheable {
	e.cmds[0] = c
	return e.cmds[:1]
}

// two is the read of the commands c and d, in e's cmds.
func (e *env) two(c, d rueidis.Cacheable) []rueidis.Cacheable {
	e.cmds[0], e.cmds[1] = c, d
	return e.cmds[:2]
}
