package core

import (
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/redisconn"
)

// Options configure a Store. Location, Now, Limits, CachedDims (nil),
// CacheTTL, DedupeTTL, ReadTimeout and WriteTimeout left zero take the
// counter's defaults; StaleMax, HotKeyRate and WriteReplicas left zero
// turn last-known values, hot keys and replicated writes off. Defaults
// holds the counter's defaults of every field.
type Options struct {
	// Location is the zone of natural days (COUNTER_TIMEZONE).
	Location *time.Location
	// Now is the clock (time.Now when nil): tests stand at any instant.
	Now func() time.Time
	// Limits bound what an item may ask for, and name the dimensions and
	// events a campaign counts.
	Limits Limits
	// CachedDims are read through client-side caching
	// (COUNTER_CACHED_DIMENSIONS); CacheTTL is the longest a cached count
	// lives (COUNTER_CACHE_TTL).
	CachedDims []string
	CacheTTL   time.Duration
	// DedupeTTL is how long an event id is remembered (COUNTER_DEDUPE_TTL).
	DedupeTTL time.Duration
	// ReadTimeout is the hard deadline of every read (COUNTER_READ_TIMEOUT).
	ReadTimeout time.Duration
	// StaleMax is the oldest last-known value a failed read may answer, 0
	// for none (COUNTER_STALE_MAX); StaleCacheMB bounds their memory.
	StaleMax     time.Duration
	StaleCacheMB int
	// HotKeys and HotKeyRate: how many counters read at least HotKeyRate
	// times a second go through client-side caching (0 rate: none).
	HotKeys    int
	HotKeyRate float64
	// WriteReplicas is how many replicas a write waits for (WAIT), within
	// WriteTimeout.
	WriteReplicas int
	WriteTimeout  time.Duration
	// Reach reports whether Redis is reachable; nil for none.
	Reach *redisconn.Reach
	// Cache is the client-side cache installed on rdb's options, if any:
	// a read whose counts are all in it is answered on the caller's
	// goroutine.
	Cache *LocalCache
}

// Defaults are the counter's defaults, those of an Options field left zero.
var Defaults = Options{
	Location:     time.UTC,
	Limits:       Limits{Dimensions: []string{"device", "bundle", "tagid"}, Events: []string{"win", "billing", "imp"}, MaxHours: 168, MaxSliding: 604800, MaxSeconds: 2592000, MaxDays: 366},
	CachedDims:   []string{"bundle", "tagid"},
	CacheTTL:     10 * time.Second,
	DedupeTTL:    10 * time.Minute,
	ReadTimeout:  5 * time.Millisecond,
	StaleMax:     time.Minute,
	StaleCacheMB: 64,
	HotKeys:      64,
	HotKeyRate:   100,
	WriteTimeout: time.Second,
}

// withDefaults fills o's zero fields from Defaults.
func (o Options) withDefaults() Options {
	d := Defaults
	if o.Location == nil {
		o.Location = d.Location
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Limits = o.Limits.withDefaults()
	if o.CachedDims == nil {
		o.CachedDims = d.CachedDims
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = d.CacheTTL
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = d.DedupeTTL
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = d.ReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = d.WriteTimeout
	}
	if o.Reach == nil {
		o.Reach = &redisconn.Reach{}
	}
	return o
}

// NewStore is a store on rdb; m receives what it observes (NopMetrics when
// nil). Close stops its readers and writers.
func NewStore(rdb rueidis.Client, o Options, m Metrics) *Store {
	wallClock := o.Now == nil
	o = o.withDefaults()
	if m == nil {
		m = NopMetrics{}
	}
	st := &Store{
		rdb:         rdb,
		cluster:     rdb.Mode() == rueidis.ClientModeCluster,
		reach:       o.Reach,
		local:       o.Cache,
		loc:         o.Location,
		now:         o.Now,
		wallClock:   wallClock,
		cached:      slices.Clone(o.CachedDims),
		cacheTTL:    o.CacheTTL,
		dedupeTTL:   o.DedupeTTL,
		readTimeout: o.ReadTimeout,
		metrics:     m,
		retention:   o.Limits.MaxHours,
		limits:      o.Limits,
		known:       newLastKnown(o.StaleMax, o.StaleCacheMB),
		knownHashes: newKnownHashes(o.StaleMax),
		hot:         newHotKeys(o.HotKeys, o.HotKeyRate, time.Second),
		replicated:  newReplicatedWrites(rdb, o.WriteReplicas, o.WriteTimeout),
	}
	st.hot.start()
	st.startReaders()
	st.startWriters()
	return st
}
