package core

import (
	"sync"
	"time"
)

// maxKnownHashes bounds the last-known hashes kept (campaign declarations:
// one per campaign read); past it the oldest half is dropped.
const maxKnownHashes = 1 << 16

// knownHashes are the hashes Hashes last read, by key, to answer while
// Redis does not (within maxAge).
type knownHashes struct {
	mu     sync.Mutex
	m      map[string]knownHash
	maxAge time.Duration
}

type knownHash struct {
	h  map[string]string
	at time.Time
}

func newKnownHashes(maxAge time.Duration) *knownHashes {
	if maxAge <= 0 {
		return nil
	}
	return &knownHashes{m: map[string]knownHash{}, maxAge: maxAge}
}

// remember keeps the hashes read (non-nil) of keys.
func (k *knownHashes) remember(keys []string, hs []map[string]string, now time.Time) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m)+len(keys) > maxKnownHashes {
		k.dropOldest(now)
	}
	for i, key := range keys {
		if hs[i] == nil {
			continue
		}
		// The same cached map, remembered moments ago: its age is off by
		// at most rememberedWithin, as a last-known count's.
		if e, ok := k.m[key]; ok && SameHash(e.h, hs[i]) && now.Sub(e.at) < time.Duration(rememberedWithin) {
			continue
		}
		k.m[key] = knownHash{hs[i], now}
	}
}

// dropOldest keeps the entries younger than half maxAge.
func (k *knownHashes) dropOldest(now time.Time) {
	for key, e := range k.m {
		if now.Sub(e.at) > k.maxAge/2 {
			delete(k.m, key)
		}
	}
	if len(k.m) > maxKnownHashes/2 {
		clear(k.m)
	}
}

// fill sets each nil out[i] to the last-known hash of keys[i] where one
// is young enough, and answers the age of each used (ms, at least 1; 0
// for the hashes read now).
func (k *knownHashes) fill(keys []string, out []map[string]string, now time.Time) (ages []int64) {
	if k == nil {
		return nil
	}
	ages = make([]int64, len(keys))
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, key := range keys {
		if out[i] != nil {
			continue
		}
		if e, ok := k.m[key]; ok && now.Sub(e.at) <= k.maxAge {
			out[i] = e.h
			ages[i] = max(now.Sub(e.at).Milliseconds(), 1)
		}
	}
	return ages
}
