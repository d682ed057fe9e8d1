package core

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestHotKeysFindsTheKeyReadMost(t *testing.T) {
	h := newHotKeys(16, 100, time.Second)
	for i := range 2000 {
		if i%8 == 0 {
			h.observe("bot") // 250 sampled reads (about 2,000 a second): far above 100
		}
		h.observe(fmt.Sprint("dev-", i)) // 2000 keys sampled once
	}
	h.observe("warm")
	h.rotate()
	if !h.isHot("bot") || h.isHot("warm") || h.isHot("dev-1") || h.size() != 1 {
		t.Fatalf("hot set after the window: bot %v warm %v size %d", h.isHot("bot"), h.isHot("warm"), h.size())
	}
	if l := h.list(); len(l) == 0 || l[0].Key != "bot" || !l[0].Hot || l[0].Rate < 1000 {
		t.Errorf("list: %+v", l)
	}
	h.rotate() // a window without reads: nothing is hot any more
	if h.isHot("bot") || h.size() != 0 {
		t.Error("bot still hot after a window without reads")
	}
	var off *hotKeys
	off.observe("x")
	if off.isHot("x") || off.size() != 0 || len(off.list()) != 0 {
		t.Error("a disabled sketch answered")
	}
}

// TestHotKeysKeepsSpaceSavingsBounds: on skewed random streams the sketch
// keeps the guarantees of Space-Saving that the hot set rests on, against
// exact counts: every tracked key's count less its error is at most what
// it was read, its count at least that; the counts add up to the reads
// once the sketch is full; a key read more than reads/k times is tracked;
// the least count is what a new key inherits.
func TestHotKeysKeepsSpaceSavingsBounds(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		k := 1 + r.IntN(40)
		h := newHotKeys(k, 1, time.Second)
		zipf := rand.NewZipf(rand.New(rand.NewPCG(seed, 8)), 1.1+r.Float64(), 1, uint64(10+r.IntN(5000)))
		exact := map[string]uint64{}
		reads := 1 + r.IntN(20000)
		for range reads {
			key := fmt.Sprint("k", zipf.Uint64())
			exact[key]++
			h.observe(key)
		}
		if len(h.counts) != min(k, len(exact)) || len(h.at) != len(h.counts) {
			t.Fatalf("seed %d: %d tracked, %d placed, want %d", seed, len(h.counts), len(h.at), min(k, len(exact)))
		}
		var sum, least uint64 = 0, math.MaxUint64
		for i, c := range h.counts {
			if c.i != i || h.at[c.key] != c {
				t.Fatalf("seed %d: %s at %d, says %d", seed, c.key, i, c.i)
			}
			if c.n-c.err > exact[c.key] || c.n < exact[c.key] {
				t.Fatalf("seed %d: %s counted %d (error %d), read %d", seed, c.key, c.n, c.err, exact[c.key])
			}
			sum += c.n
			least = min(least, c.n)
		}
		if len(exact) >= k && sum != uint64(reads) {
			t.Fatalf("seed %d: counts add up to %d, %d reads", seed, sum, reads)
		}
		if h.counts[0].n != least {
			t.Fatalf("seed %d: the root holds %d, the least is %d", seed, h.counts[0].n, least)
		}
		for key, n := range exact {
			if _, ok := h.at[key]; !ok && n > uint64(reads/k) {
				t.Fatalf("seed %d: %s read %d times of %d (k %d) is not tracked", seed, key, n, reads, k)
			}
		}
	}
}

// BenchmarkHotKeysObserve: a sampled cold read of a device never seen in
// the window, the usual case, takes over the least counted of 64 keys.
func BenchmarkHotKeysObserve(b *testing.B) {
	h := newHotKeys(64, 1, time.Second)
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = fmt.Sprint("{win:device:c42:", i, "}")
	}
	i := 0
	for b.Loop() {
		h.observe(keys[i&(len(keys)-1)])
		i++
	}
}
