package main

import (
	"time"

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
	check(it *counting.Item, lim *limits, field string) error
	// write is the script run that counts the item's hits.
	write(it *counting.Item, e *env) (s *script, keys, args []string)
	// wrote decodes the script's answer into r.
	wrote(it *counting.Item, e *env, v []int64, r *counting.Result) error
	// read is the commands that read the item; cacheable is false when a
	// cached answer would be wrong (a window whose bounds move every ms).
	read(it *counting.Item, e *env) (cmds []rueidis.Cacheable, cacheable bool)
	// got decodes the answers of read's commands, in their order, into r.
	got(it *counting.Item, e *env, rs []rueidis.RedisResult, r *counting.Result) error
}

// kinds is every kind of counter the counter serves.
var kinds = map[counting.Kind]kind{
	counting.Day:     windowKind{unit: counting.Day},
	counting.Seconds: windowKind{unit: counting.Seconds},
	counting.Hours:   hoursKind{},
	counting.Sliding: slidingKind{},

	counting.FixedWindow:   fixedWindow,
	counting.SlidingLog:    slidingLog,
	counting.SlidingWindow: slidingWindow,
	counting.LeakyBucket:   leakyBucket,
	counting.TokenBucket:   tokenBucket,
	counting.GCRA:          gcra,
}

// env is what kinds build commands from for one store call: the instant,
// the zone, and the settings that decide retention.
type env struct {
	b         rueidis.Builder
	now       time.Time
	loc       *time.Location
	hour      int64 // epoch hour of now
	dedupeTTL time.Duration
	retention int                              // hours every hour hash keeps
	fields    func(hour int64, n int) []string // hash fields of the n hours up to hour
}

// limits bound what an item may ask for.
type limits struct {
	dims       []string
	events     []string
	maxHours   int
	maxSliding int
	maxSeconds int
	maxDays    int
	maxHits    int64
	maxLimit   int64
}
