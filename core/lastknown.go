package core

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// lastKnown remembers what reads got from Redis, so that a read Redis
// cannot serve in time answers the value last read (stale, with its age)
// rather than 0, as a frequency control degrades to a local cache. Writes never read
// from it.
//
// Every read remembers every count it got, so remembering must cost next
// to nothing: a batch of 50 candidates for a new device is 100 new
// entries. A general cache with an eviction policy (maypok86/otter was
// tried) took 17% of the counter's CPU on make bench's batch-50, and as
// much again in GC scanning its entries. This is a direct-mapped table
// instead: an entry's slot is its key's hash, a newer entry overwrites an
// older one in its slot, and a slot holds no pointer (the key is kept as
// its 64-bit hash), so the GC never scans the table. A lookup whose slot
// holds another key finds nothing.
type lastKnown struct {
	seed   maphash.Seed
	slots  []knownSlot
	locks  [256]sync.Mutex // striped by slot
	maxAge time.Duration
}

// knownSlot is one remembered count: what the read kinds answer. It is
// written under its lock; hash, at and count are atomics as well, so that
// remember can see without the lock that the slot already holds this
// count, read moments ago (a hot counter's reads, all at once).
type knownSlot struct {
	hash          atomic.Uint64 // 0: empty
	at            atomic.Int64  // unix ns of the read
	count         atomic.Int64
	ttlMs, lastAt int64
	code          int32
	allowed, used bool
}

// rememberedWithin is how old a slot's copy of the same count may be for
// remember to leave it as it is: a hot counter read thousands of times a
// second is written a few times, and its age is off by at most this.
const rememberedWithin = int64(50 * time.Millisecond)

// knownSlotBytes is what one slot costs.
const knownSlotBytes = int(unsafe.Sizeof(knownSlot{}))

// knownCopy is a slot's fields that only its lock guards, as fill reads
// them.
type knownCopy struct {
	ttlMs, lastAt int64
	code          int32
	allowed, used bool
}

func newLastKnown(maxAge time.Duration, mb int) *lastKnown {
	if maxAge <= 0 {
		return nil
	}
	return &lastKnown{seed: maphash.MakeSeed(), slots: make([]knownSlot, (mb<<20)/knownSlotBytes), maxAge: maxAge}
}

// hash names an item's value: its kind and span, scope and subject. Two
// reads with the same hash read the same thing (64 bits: a collision
// among millions of counters is as good as impossible, and would answer a
// stale read with another count at worst).
func (l *lastKnown) hash(it *counting.Item) uint64 {
	// One buffer hashed at once: a read remembers every count it got.
	var buf [192]byte
	b := append(buf[:0], it.Spec.Kind...)
	b = binary.LittleEndian.AppendUint64(b, uint64(it.Spec.Span))
	b = binary.LittleEndian.AppendUint32(b, uint32(it.Scope.Business))
	for _, s := range [...]string{it.Scope.Level, it.Scope.Campaign, it.Scope.Event, it.Scope.Policy, it.Subject.Dim, it.Subject.ID} {
		b = append(b, s...)
		b = append(b, 0)
	}
	return maphash.Bytes(l.seed, b) | 1 // never 0, the empty slot
}

func (l *lastKnown) slot(h uint64) (*knownSlot, *sync.Mutex) {
	i := h % uint64(len(l.slots))
	return &l.slots[i], &l.locks[i%uint64(len(l.locks))]
}

// remember keeps the results of a read that Redis answered.
//
// A batch read of a device no one read lately remembers counts whose slots
// are in no CPU cache: each slot is a miss to memory, and one at a time
// (each waits behind the lock before it) they were a seventh of the
// counter's CPU in make bench's batch of 50. So remember first hashes
// every count, then loads every slot with nothing between the loads, so
// that their misses overlap, and only then writes them.
func (l *lastKnown) remember(items []counting.Item, res []counting.Result, now time.Time) {
	if l == nil {
		return
	}
	var buf [128]uint64
	hs := buf[:0]
	if len(res) > len(buf) {
		hs = make([]uint64, 0, len(res))
	}
	for i := range res {
		if r := &res[i]; r.Degraded || r.Stale {
			hs = append(hs, 0)
			continue
		}
		hs = append(hs, l.hash(&items[i]))
	}
	for _, h := range hs {
		if h != 0 {
			s, _ := l.slot(h)
			s.hash.Load() // an atomic load is never dropped
		}
	}
	at := now.UnixNano()
	for i, h := range hs {
		if h == 0 {
			continue
		}
		r := &res[i]
		s, mu := l.slot(h)
		if s.hash.Load() == h && s.count.Load() == r.Count && at-s.at.Load() < rememberedWithin {
			continue
		}
		mu.Lock()
		s.hash.Store(h)
		s.at.Store(at)
		s.count.Store(r.Count)
		s.ttlMs, s.lastAt, s.code, s.allowed, s.used = r.TTLMs, r.LastAt, int32(r.Code), r.Allowed, true
		mu.Unlock()
	}
}

// fill answers every degraded result that has a value younger than maxAge
// with it, marked stale; it returns how many it answered. clock is asked
// the time only when a result is degraded.
func (l *lastKnown) fill(items []counting.Item, res []counting.Result, clock func() time.Time) int {
	if l == nil {
		return 0
	}
	n := 0
	var now time.Time
	for i := range res {
		if !res[i].Degraded {
			continue
		}
		if now.IsZero() {
			now = clock()
		}
		h := l.hash(&items[i])
		s, mu := l.slot(h)
		mu.Lock()
		hash, kat, count := s.hash.Load(), s.at.Load(), s.count.Load()
		k := knownCopy{ttlMs: s.ttlMs, lastAt: s.lastAt, code: s.code, allowed: s.allowed, used: s.used}
		mu.Unlock()
		age := now.Sub(time.Unix(0, kat))
		if !k.used || hash != h || age > l.maxAge {
			continue
		}
		r := counting.Result{Code: int(k.code), Count: count, TTLMs: k.ttlMs, LastAt: k.lastAt, Allowed: k.allowed,
			Stale: true, AgeMs: age.Milliseconds()}
		if k.ttlMs > 0 {
			// The window's end has not moved since the value was read.
			r.TTLMs = k.ttlMs - r.AgeMs
			if r.TTLMs <= 0 {
				r.Code, r.Msg, r.Count, r.TTLMs = apierr.KeyNotFound, "no live window", 0, 0
			}
		}
		res[i] = r
		n++
	}
	return n
}
