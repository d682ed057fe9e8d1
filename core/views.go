package core

import (
	"context"
	"reflect"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/counting"
)

// View checks one hit of it (a rate-limiter item, the view counter's
// limits) and, when admitted, adds it to the String total: one function
// call on one Redis, two calls on a Cluster (the total has its own slot).
// sub is a key suffix of it's limits (one limit per article, say). It
// answers the check and the total after it; the error is Redis's.
func (s *Store) View(ctx context.Context, it counting.Item, sub, total string) (counting.Result, int64, error) {
	var r counting.Result
	var n int64
	err := s.Guarded(ctx, func(ctx context.Context) error {
		e := s.env()
		keys, args := limitKeysArgs(&it, e, sub)
		cluster := s.rdb.Mode() == rueidis.ClientModeCluster
		if !cluster {
			keys = append(keys, total)
		}
		out, err := limitFunction.exec(ctx, s.rdb, keys, args).AsIntSlice()
		if err != nil {
			s.metrics.RedisError("view")
			return err
		}
		if err := (limiterKind{}).wrote(&it, e, out, &r); err != nil {
			return err
		}
		if !cluster {
			n = out[len(out)-1]
			return nil
		}
		b := s.rdb.B()
		cmd := b.Get().Key(total).Build()
		if r.Allowed {
			cmd = b.Incr().Key(total).Build()
		}
		if n, err = s.rdb.Do(ctx, cmd).AsInt64(); rueidis.IsRedisNil(err) {
			err = nil
		}
		if err != nil {
			s.metrics.RedisError("view_total")
		}
		return err
	})
	return r, n, err
}

// Total reads a String counter (a view total), 0 when absent, under the
// read rules: skipped during a stall.
func (s *Store) Total(ctx context.Context, key string) (int64, error) {
	var n int64
	err := s.Guarded(ctx, func(ctx context.Context) (err error) {
		if n, err = s.rdb.Do(ctx, s.rdb.B().Get().Key(key).Build()).AsInt64(); rueidis.IsRedisNil(err) {
			err = nil
		}
		return err
	})
	return n, err
}

// Hashes reads the hashes at keys through client-side caching (a hash
// edited anywhere is invalidated at once), in one pipelined round trip
// per node for those not cached, under the read rules: skipped during a
// stall. A hash the process's client-side cache (Options.Cache) holds is
// answered from it on the caller's goroutine, decoded once per cached
// answer: such maps are shared by every reader, so no caller may change
// what Hashes answers. An absent hash reads as an empty map. When Redis
// does not answer (err), a hash not served from the cache answers its
// last-known value when it was read within StaleMax, ages[i] ms old (ages
// is nil when every hash was read now), else nil.
func (s *Store) Hashes(ctx context.Context, keys []string) (out []map[string]string, ages []int64, err error) {
	out = make([]map[string]string, len(keys))
	found := 0
	if s.local != nil {
		// Client-side TTLs are wall-clock instants (as in readLocal).
		found = s.local.lookupHashes(keys, time.Now(), out)
	}
	if found < len(keys) {
		err = s.Guarded(ctx, func(ctx context.Context) error {
			return s.readHashes(ctx, keys, out, len(keys)-found)
		})
	}
	now := s.now()
	s.knownHashes.remember(keys, out, now)
	if err != nil {
		ages = s.knownHashes.fill(keys, out, now)
	}
	return out, ages, err
}

// readHashes reads the n hashes of keys whose out[i] is nil, in one
// DoMultiCache, into out.
func (s *Store) readHashes(ctx context.Context, keys []string, out []map[string]string, n int) error {
	cmds := make([]rueidis.CacheableTTL, 0, n)
	at := make([]int, 0, n)
	for i, k := range keys {
		if out[i] == nil {
			cmds = append(cmds, rueidis.CT(s.rdb.B().Hgetall().Key(k).Cache(), s.cacheTTL))
			at = append(at, i)
		}
	}
	var first error
	for j, r := range s.rdb.DoMultiCache(ctx, cmds...) {
		m, err := r.AsStrMap()
		if err != nil {
			if first == nil {
				first = err
				s.metrics.RedisError("read")
			}
			continue
		}
		if m == nil {
			m = map[string]string{}
		}
		out[at[j]] = m
	}
	return first
}

// SameHash reports whether a and b are one map (not merely equal): what
// Hashes answers from the client-side cache is the same map until Redis
// invalidates it.
func SameHash(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
