package core

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/counting"
)

// LocalCache holds what client-side caching keeps of Redis in this process,
// for every connection of one rueidis client, in one table that a read
// looks into on its own goroutine: a count already here costs a map lookup,
// no hand-off to a reader and no trip through rueidis. A miss, or a value
// whose client-side TTL has passed, goes the usual way.
//
// rueidis still owns the protocol: Install gives each connection a store
// through rueidis.NewSimpleCacheAdapter, which registers in-flight reads,
// fills the table with their answers and deletes what Redis invalidates.
// Sharing one table between connections is sound because a value stays
// only while the connection that read it tracks its key: the invalidation
// of a key deletes it whatever connection filled it, and a connection that
// breaks takes the answers it put there with it (another connection's
// answers stay: their invalidations still come on their own connections).
type LocalCache struct {
	mu       sync.RWMutex
	m        map[string]localEntry
	bytes    int
	maxBytes int
	flushes  atomic.Int64
}

// localEntry is one cached answer, decoded once, when the answer came,
// for every read until Redis invalidates it: a counter's hour buckets
// (HGETALL of hfreq:), or any other whole hash (a campaign's declaration,
// which Hashes answers).
type localEntry struct {
	msg     rueidis.RedisMessage
	buckets []bucket
	hash    map[string]string // shared by every reader: never changed
	owner   *conn             // the connection that put it here
}

// newLocalEntry decodes what a read of key will want decoded.
func newLocalEntry(key string, val rueidis.RedisMessage) localEntry {
	e := localEntry{msg: val}
	if !strings.HasSuffix(key, "HGETALL") {
		return e
	}
	if strings.HasPrefix(key, "hfreq:") {
		e.buckets, _ = hourBuckets([]rueidis.RedisResult{rueidis.NewResult(val, nil)})
		return e
	}
	if m, err := val.AsStrMap(); err == nil {
		if m == nil {
			m = map[string]string{}
		}
		e.hash = m
	}
	return e
}

// NewLocalCache is a table of at most maxBytes (keys and values as rueidis
// sizes them); rueidis.DefaultCacheBytes when maxBytes <= 0.
func NewLocalCache(maxBytes int) *LocalCache {
	if maxBytes <= 0 {
		maxBytes = rueidis.DefaultCacheBytes
	}
	return &LocalCache{m: map[string]localEntry{}, maxBytes: maxBytes}
}

// Install makes every connection of a client opened with opt cache in c.
func (c *LocalCache) Install(opt *rueidis.ClientOption) {
	opt.NewCacheStoreFn = func(rueidis.CacheStoreOption) rueidis.CacheStore {
		return rueidis.NewSimpleCacheAdapter(simpleCache{c: c, conn: new(conn)})
	}
}

// localNamed is a kind whose cached read of an item is one command on
// one key: appendLocalName appends the name LocalCache keeps its answer
// under (what rueidis's adapter names the command's answer: the key, then
// the command without it), built without building the command; false
// when the item's read is not one cached command.
type localNamed interface {
	appendLocalName(b []byte, it *counting.Item) ([]byte, bool)
}

// appendLocalName is the item's kind's appendLocalName, called on the
// kind itself rather than through localNamed: a buffer passed through an
// interface is allocated on the heap, and a read looks up every item.
func appendLocalName(b []byte, it *counting.Item) ([]byte, bool) {
	switch k := kindOf(it.Spec.Kind).(type) {
	case windowKind:
		return k.appendLocalName(b, it)
	case hoursKind:
		return k.appendLocalName(b, it)
	}
	return b, false
}

// lookupItems answers each item from the table by its kind's local name,
// or reports false when any is missing or past its client-side TTL.
// Consecutive hour windows of one counter share one answer (at). buckets
// holds each answer's decoded hour buckets (nil for other answers),
// appended to the caller's buckets.
func (c *LocalCache) lookupItems(items []counting.Item, at []span, now time.Time, buckets [][]bucket) (res []rueidis.RedisResult, _ [][]bucket, ok bool) {
	res = make([]rueidis.RedisResult, 0, len(items))
	ms := now.UnixMilli()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i := range items {
		if i > 0 && at[i] == at[i-1] {
			continue
		}
		v, ok := c.itemEntry(&items[i], ms)
		if !ok {
			return nil, nil, false
		}
		res = append(res, rueidis.NewResult(v.msg, nil))
		buckets = append(buckets, v.buckets)
	}
	return res, buckets, true
}

// lookupHashes sets each nil out[i] to the whole hash at keys[i] from the
// table, when its HGETALL's answer is there and within its client-side
// TTL (an absent hash is an empty map), and answers how many it set. The
// maps are shared by every reader until Redis invalidates them: never
// change one.
func (c *LocalCache) lookupHashes(keys []string, now time.Time, out []map[string]string) (found int) {
	var buf [160]byte
	ms := now.UnixMilli()
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, key := range keys {
		if out[i] != nil {
			continue
		}
		name := append(append(buf[:0], key...), "HGETALL"...)
		if v, hit := c.m[string(name)]; hit && v.hash != nil && v.msg.CachePXAT() > ms {
			out[i] = v.hash
			found++
		}
	}
	return found
}

// lookupItem answers one item from the table by its kind's local name,
// with its decoded hour buckets (nil for other answers); false when it is
// not there, past its client-side TTL, or not one cached command.
func (c *LocalCache) lookupItem(it *counting.Item, ms int64) (rueidis.RedisResult, []bucket, bool) {
	c.mu.RLock()
	v, ok := c.itemEntry(it, ms)
	c.mu.RUnlock()
	if !ok {
		return rueidis.RedisResult{}, nil, false
	}
	return rueidis.NewResult(v.msg, nil), v.buckets, true
}

// itemEntry is the table's answer for an item's read, by its kind's local
// name, when it is there and within its client-side TTL (ms, unix ms).
// The caller holds c.mu.
func (c *LocalCache) itemEntry(it *counting.Item, ms int64) (localEntry, bool) {
	var buf [160]byte
	name, one := appendLocalName(buf[:0], it)
	if !one {
		return localEntry{}, false
	}
	v, hit := c.m[string(name)] // no string is made for a lookup
	return v, hit && v.msg.CachePXAT() > ms
}

// size is how many answers the table holds.
func (c *LocalCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// simpleCache is the table as rueidis.SimpleCache, for the adapter of one
// connection.
type simpleCache struct {
	c    *LocalCache
	conn *conn
}

// conn is one connection's mark on the table: the answers it put there
// are its own, and filled says there were some.
type conn struct{ filled atomic.Bool }

func (s simpleCache) Get(key string) rueidis.RedisMessage {
	s.c.mu.RLock()
	defer s.c.mu.RUnlock()
	return s.c.m[key].msg
}

func (s simpleCache) Set(key string, val rueidis.RedisMessage) {
	if !s.conn.filled.Load() {
		s.conn.filled.Store(true)
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		c.bytes -= entryBytes(key, old)
	}
	e := newLocalEntry(key, val)
	e.owner = s.conn
	c.m[key] = e
	c.bytes += entryBytes(key, e)
	if c.bytes <= c.maxBytes {
		return
	}
	// Full: drop entries until a tenth is free. Go's map iteration starts
	// anywhere, so the victims are random (as Redis's own eviction is
	// sampled); a dropped answer is read again at its next miss.
	for k, v := range c.m {
		if c.bytes <= c.maxBytes-c.maxBytes/10 {
			break
		}
		delete(c.m, k)
		c.bytes -= entryBytes(k, v)
	}
}

func (s simpleCache) Del(key string) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[key]; ok {
		delete(c.m, key)
		c.bytes -= entryBytes(key, old)
	}
}

// Flush takes out of the table, when the connection closes, the answers
// it put there: they may have missed an invalidation since. What other
// connections put there stays, whose invalidations still come on their
// own connections (a Cluster node's connection that breaks leaves the
// other nodes' answers). A connection that never filled the table (one a
// Cluster's client opened to learn the topology and closed, say) has
// nothing to take.
func (s simpleCache) Flush() {
	if !s.conn.filled.Load() {
		return
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.owner == s.conn {
			delete(c.m, k)
			c.bytes -= entryBytes(k, e)
		}
	}
	c.flushes.Add(1)
}

// Flushes is how many times a connection that had filled the table broke
// and took its answers with it (they could have missed invalidations):
// each costs those counts a read from Redis.
func (c *LocalCache) Flushes() int64 { return c.flushes.Load() }

// hashFieldBytes is about what a decoded hash's map adds per field (its
// slot and the two string headers; the strings are the answer's own).
const hashFieldBytes = 48

// entryBytes is what one answer costs the table.
func entryBytes(key string, e localEntry) int {
	return len(key) + e.msg.CacheSize() + len(e.buckets)*int(unsafe.Sizeof(bucket{})) + len(e.hash)*hashFieldBytes
}
