package core

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// hotKeys finds the counters read most often among those read straight
// from Redis (device counts, by default), so that the store reads them
// through client-side caching instead (hot keys promoted
// to local memory with a short expiry; here Redis invalidates the cached
// copy the moment the key changes, so it is never stale for long, and
// writes never read from it).
//
// It is the Space-Saving algorithm (Metwally et al.) over one window at a
// time: k counters; a key not tracked takes the counter of the least
// counted one, inheriting its count as its error bound. At the end of each
// window the keys read at least rate x window times for certain (count
// less error) become the hot set for the next window, and counting starts
// again, so the set follows what is hot now.
type hotKeys struct {
	mu sync.Mutex
	k  int
	// counts is the sketch: a min-heap by count, so that the least counted
	// key is taken over in O(log k); at finds a key's count.
	counts hotHeap
	at     map[string]*hotCount
	window time.Duration
	rate   float64 // reads a second that make a key hot
	reads  atomic.Uint64
	hot    atomic.Pointer[map[string]bool]
	last   atomic.Pointer[[]HotKey] // the last window's counts, most read first
	stop   chan struct{}
}

// hotCount is a key's count, its error bound and its place in the heap.
type hotCount struct {
	key    string
	n, err uint64
	i      int
}

// hotHeap is a min-heap of counts by n, each knowing its place.
type hotHeap []*hotCount

// swap exchanges the counts at i and j and their places.
func (hh hotHeap) swap(i, j int) {
	hh[i], hh[j] = hh[j], hh[i]
	hh[i].i, hh[j].i = i, j
}

// down moves the count at i down to its place.
func (hh hotHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(hh) {
			return
		}
		m := l
		if r := l + 1; r < len(hh) && hh[r].n < hh[l].n {
			m = r
		}
		if hh[i].n <= hh[m].n {
			return
		}
		hh.swap(i, m)
		i = m
	}
}

// up moves the count at i up to its place.
func (hh hotHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if hh[p].n <= hh[i].n {
			return
		}
		hh.swap(i, p)
		i = p
	}
}

func newHotKeys(k int, rate float64, window time.Duration) *hotKeys {
	if k <= 0 || rate <= 0 {
		return nil
	}
	h := &hotKeys{k: k, counts: make(hotHeap, 0, k), at: make(map[string]*hotCount, k), window: window, rate: rate, stop: make(chan struct{})}
	h.hot.Store(&map[string]bool{})
	h.last.Store(&[]HotKey{})
	return h
}

// start rotates the window until stopped.
func (h *hotKeys) start() {
	if h == nil {
		return
	}
	go func() {
		t := time.NewTicker(h.window)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				h.rotate()
			case <-h.stop:
				return
			}
		}
	}()
}

func (h *hotKeys) close() {
	if h != nil {
		close(h.stop)
	}
}

// sampleEvery: one read in this many is counted (and the counts scaled
// back), so that the sketch's lock and its update cost a cold read next
// to nothing; a key read 100 times a second is still sampled about 12
// times in its window.
const sampleEvery = 8

// sample reports whether this read is one the sketch counts.
func (h *hotKeys) sample() bool { return h.reads.Add(1)%sampleEvery == 0 }

// observe counts one sampled read of key.
func (h *hotKeys) observe(key string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.at[key]; ok {
		c.n++
		h.counts.down(c.i)
		return
	}
	if len(h.counts) < h.k {
		c := &hotCount{key: key, n: 1, i: len(h.counts)}
		h.counts = append(h.counts, c)
		h.at[key] = c
		h.counts.up(c.i)
		return
	}
	// Take over the least counted key, at the heap's root.
	c := h.counts[0]
	delete(h.at, c.key)
	c.key, c.err = key, c.n
	c.n++
	h.at[key] = c
	h.counts.down(0)
}

// size is how many keys are hot now.
func (h *hotKeys) size() int {
	if h == nil {
		return 0
	}
	return len(*h.hot.Load())
}

// isHot reports whether key is in the current hot set.
func (h *hotKeys) isHot(key string) bool {
	if h == nil {
		return false
	}
	_, ok := (*h.hot.Load())[key]
	return ok
}

// rotate makes the keys whose guaranteed count (count less its error)
// reached rate x window the hot set, keeps the window's counts for
// GET /v1/hotkeys, and starts counting again.
func (h *hotKeys) rotate() {
	h.mu.Lock()
	counts := h.counts
	h.counts, h.at = make(hotHeap, 0, h.k), make(map[string]*hotCount, h.k)
	h.mu.Unlock()
	hot := map[string]bool{}
	need := h.rate * h.window.Seconds() / sampleEvery
	per := sampleEvery / h.window.Seconds() // reads a second per sampled read
	last := make([]HotKey, 0, len(counts))
	for _, c := range counts {
		isHot := float64(c.n-c.err) >= need
		if isHot {
			hot[c.key] = true
		}
		last = append(last, HotKey{Key: c.key, Rate: float64(c.n) * per, Error: float64(c.err) * per, Hot: isHot})
	}
	slices.SortFunc(last, func(a, b HotKey) int { return cmp.Compare(b.Rate, a.Rate) })
	h.hot.Store(&hot)
	h.last.Store(&last)
}

// HotKey is one entry of GET /v1/hotkeys.
type HotKey struct {
	Key   string  `json:"key"`
	Rate  float64 `json:"readsPerSec"`
	Error float64 `json:"errorPerSec,omitempty"`
	Hot   bool    `json:"hot"`
}

// list is the last window's tracked keys, most read first.
func (h *hotKeys) list() []HotKey {
	if h == nil {
		return []HotKey{}
	}
	return *h.last.Load()
}
