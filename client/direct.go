package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redisconn"
)

// DirectOptions describe the counter whose Redis a direct Client reads
// (NewDirect). The zero value matches a counter on its defaults.
type DirectOptions struct {
	// Schema is what the counter counts: its dimensions, events and
	// largest hour window (GET /v1/schema, FetchSchema). A call with an
	// item the counter would refuse is refused as the counter refuses it
	// (a bad id or an unknown dimension): every candidate is degraded.
	// Empty fields take the counter's defaults.
	Schema counting.Schema
	// CachedDims are the dimensions read through client-side caching, the
	// counter's COUNTER_CACHED_DIMENSIONS (bundle and tagid when nil): a
	// cached count is served from process memory, and Redis invalidates
	// it at once when it changes.
	CachedDims []string
	// CacheTTL is the longest a cached count lives, the counter's
	// COUNTER_CACHE_TTL (10 s when 0).
	CacheTTL time.Duration
	// ReserveTTL is how long Reserve holds a bid, the counter's
	// COUNTER_RESERVE_TTL (3s when 0).
	ReserveTTL time.Duration
	// StaleMax is how old a last-known count may be to answer when Redis
	// does not answer in time (Decision.Stale), as the counter's
	// COUNTER_STALE_MAX: 60 s when 0, none when negative.
	StaleMax time.Duration
	// HotKeyRate makes a counter read at least this often a second go
	// through client-side caching while it stays hot, as the counter's
	// COUNTER_HOT_KEY_RATE: 100 when 0, never when negative.
	HotKeyRate float64
	// FromReplicas reads from the replicas of a Redis Cluster, as the
	// counter does with COUNTER_READ_FROM=replica: counts lag the writes
	// by the replication delay. NewDirect refuses it on one Redis.
	FromReplicas bool
}

// NewDirect returns a Client that reads the counter's Redis itself, at
// redisURL (the counter's REDIS_URL, in rueidis form; Cluster is
// detected): no HTTP hop. It runs the counter's own counting core
// in-process (packages core and campaign): the same validation, keys,
// commands, deadline, stall, last-known values and hot keys, one
// pipelined round trip per Redis node for all candidates. Decide answers
// exactly as a Client from New does on the same counts, with the same
// rate limit and fail-open or fail-closed default. Close releases the
// connections.
func NewDirect(redisURL string, opts Options, d DirectOptions) (*Client, error) {
	cache := core.NewLocalCache(0)
	rdb, err := redisconn.Open(redisURL, func(opt *rueidis.ClientOption) {
		cache.Install(opt)
		if d.FromReplicas {
			opt.SendToReplicas = redisconn.ReadOnly
		}
	})
	if err != nil {
		return nil, fmt.Errorf("freqcap client: %w", err)
	}
	if d.FromReplicas && rdb.Mode() != rueidis.ClientModeCluster {
		rdb.Close()
		return nil, fmt.Errorf("freqcap client: FromReplicas needs a Redis Cluster with replicas; %s is not a cluster", redisURL)
	}
	c := newClient(opts)
	o := d.storeOptions(c.timeout, c.now)
	o.Cache = cache
	st := core.NewStore(rdb, o, nil)
	counters, parser := campaign.Counters{Store: st, M: core.NopMetrics{}}, campaign.NewParser(st.Limits())
	c.readCaps = directCaps(counters, parser)
	c.decide = directDecide(counters, parser, c.maxBatch)
	c.reserve = directReserve(counters, parser, c.maxBatch, d.ReserveTTL)
	c.close = func() { st.Close(); rdb.Close() }
	return c, nil
}

// storeOptions are the core store's options of a direct Client whose
// calls have timeout.
func (d DirectOptions) storeOptions(timeout time.Duration, now func() time.Time) core.Options {
	s := d.Schema
	o := core.Defaults
	o.Now, o.ReadTimeout, o.CacheTTL = now, timeout, d.CacheTTL
	o.Limits = core.Limits{Dimensions: s.Dimensions, Events: s.Events, MaxHours: s.MaxWindowHours, MaxSliding: s.MaxPaceWindowSec}
	if d.CachedDims != nil {
		o.CachedDims = d.CachedDims
	}
	switch {
	case d.StaleMax < 0:
		o.StaleMax = 0
	case d.StaleMax > 0:
		o.StaleMax = d.StaleMax
	}
	switch {
	case d.HotKeyRate < 0:
		o.HotKeyRate = 0
	case d.HotKeyRate > 0:
		o.HotKeyRate = d.HotKeyRate
	}
	return o
}

// directCaps reads Decide's caps in this process as the counter reads
// POST /v1/freq/batch, without the wire's shapes: a query per cap, built
// and checked as the counter's parser builds it from the batch item
// (campaign.Parser.CheckRead), and the counts taken from the store's
// results. A cap the counter would refuse refuses the call with the error
// the counter gives.
func directCaps(counters campaign.Counters, parser *campaign.Parser) func(context.Context, Identities, []Candidate, []ref) ([]counted, error) {
	return func(ctx context.Context, ids Identities, cands []Candidate, refs []ref) ([]counted, error) {
		nw := capWindows(cands, refs)
		// A few allocations whatever the number of caps (each a slice
		// of them all), none per cap.
		qs, dims := make([]campaign.Query, len(refs)), make([]campaign.Dim, len(refs))
		hours, wins := make([]int, 0, nw), make([]int, nw)
		for k, r := range refs {
			cand, cp, q := &cands[r.cand], &cands[r.cand].Caps[r.cap], &qs[k]
			dims[k] = campaign.Dim{Name: cp.Dim, ID: ids[cp.Dim]}
			q.CID, q.Event, q.Dims = cand.CID, cand.Event, dims[k:k+1:k+1]
			if cp.Pace != nil {
				q.PaceWindowSec = int(cp.Pace.Window / time.Second)
			}
			n := len(cp.Windows)
			q.Windows, wins = wins[:0:n], wins[n:]
			hours = hours[:0]
			for _, w := range cp.Windows {
				hours = append(hours, w.Hours)
			}
			if !parser.CheckRead(q, hours) {
				_, err := parser.ReadItem(capItem(ids, cand, cp), k)
				if err == nil {
					err = fmt.Errorf("campaign %s: the cap on %s was refused by the direct check alone", cand.CID, cp.Dim)
				}
				return nil, fmt.Errorf("freqcap client: %w", err)
			}
		}
		res := counters.Read(ctx, qs)
		out := newCounted(cands, refs)
		for k, r := range refs {
			cp, q, g, c := &cands[r.cand].Caps[r.cap], &qs[k], &out[k], &res[k].Counts[0]
			g.failed, g.stale, g.ageMs, g.day = res[k].Err != nil, res[k].Stale, res[k].AgeMs, c.Day
			for i, w := range cp.Windows {
				// The query's windows are sorted and distinct.
				g.windows[i] = c.Windows[slices.Index(q.Windows, w.Hours)]
			}
			if q.PaceWindowSec > 0 {
				g.pace = &c.Pace
			}
		}
		return out, nil
	}
}
