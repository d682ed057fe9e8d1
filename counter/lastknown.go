package main

import (
	"time"

	"github.com/maypok86/otter/v2"

	"github.com/freqcap/freqcap/shared/counting"
)

// lastKnown remembers what reads got from Redis, so that a read Redis
// cannot serve in time answers the value last read (stale, with its age)
// rather than 0, as seed 002 degrades to a local cache. Writes never read
// from it. Bounded in bytes (maypok86/otter, S3-FIFO eviction); entries
// older than COUNTER_STALE_MAX are never answered and expire.
type lastKnown struct {
	c      *otter.Cache[knownKey, known]
	maxAge time.Duration
}

// known is one item's last read and when it was made.
type known struct {
	r  counting.Result
	at time.Time
}

// knownWeight is what one entry costs, its key aside: the Result and the
// cache's own bookkeeping, as a round figure.
const knownWeight = 200

func newLastKnown(maxAge time.Duration, mb int) *lastKnown {
	if maxAge <= 0 {
		return nil
	}
	return &lastKnown{maxAge: maxAge, c: otter.Must(&otter.Options[knownKey, known]{
		MaximumWeight: uint64(mb) << 20,
		Weigher: func(k knownKey, _ known) uint32 {
			return uint32(len(k.scope.Campaign) + len(k.scope.Event) + len(k.scope.Policy) + len(k.subject.Dim) + len(k.subject.ID) + knownWeight)
		},
		ExpiryCalculator: otter.ExpiryWriting[knownKey, known](maxAge),
	})}
}

// knownKey names an item's value: its kind and span, scope and subject.
// Two reads of the same key read the same thing. A struct of the item's
// own strings: no key is built per read.
type knownKey struct {
	kind    counting.Kind
	span    int64
	scope   counting.Scope
	subject counting.Subject
}

func itemKey(it *counting.Item) knownKey {
	return knownKey{kind: it.Spec.Kind, span: it.Spec.Span, scope: it.Scope, subject: it.Subject}
}

// remember keeps the results of a read that Redis answered.
func (l *lastKnown) remember(items []counting.Item, res []counting.Result, now time.Time) {
	if l == nil {
		return
	}
	for i := range res {
		r := &res[i]
		if r.Degraded || r.Stale {
			continue
		}
		key := itemKey(&items[i])
		// A hot count read again within a second with the same value keeps
		// its entry: no new node per read (its age is then off by at most
		// refreshEvery).
		if old, ok := l.c.GetIfPresent(key); ok && now.Sub(old.at) < refreshEvery &&
			old.r.Count == r.Count && old.r.LastAt == r.LastAt && old.r.Code == r.Code {
			continue
		}
		l.c.Set(key, known{r: *r, at: now})
	}
}

// refreshEvery is how long an unchanged last-known value is kept as it is.
const refreshEvery = time.Second

// fill answers every degraded result that has a value younger than maxAge
// with it, marked stale; it returns how many it answered.
func (l *lastKnown) fill(items []counting.Item, res []counting.Result, now time.Time) int {
	if l == nil {
		return 0
	}
	n := 0
	for i := range res {
		if !res[i].Degraded {
			continue
		}
		k, ok := l.c.GetIfPresent(itemKey(&items[i]))
		if !ok || now.Sub(k.at) > l.maxAge {
			continue
		}
		res[i] = k.r
		res[i].Stale, res[i].AgeMs = true, now.Sub(k.at).Milliseconds()
		n++
	}
	return n
}
