package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
	"github.com/freqcap/freqcap/shared/keyspace"
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
	// FromReplicas reads from the replicas of a Redis Cluster, as the
	// counter does with COUNTER_READ_FROM=replica: counts lag the writes
	// by the replication delay. NewDirect refuses it on one Redis.
	FromReplicas bool
}

// NewDirect returns a Client that reads the counter's Redis itself, at
// redisURL (the counter's REDIS_URL, in rueidis form; Cluster is detected),
// as seed 000's bidders do: no HTTP hop, the keys the counter writes read
// with the commands the counter reads them with (package keyspace), one
// pipelined round trip per Redis node for all candidates, and hot
// dimensions from client-side caching. Decide answers exactly as a Client
// from New does on the same counts, with the same deadline, rate limit and
// fail-open or fail-closed default; it does not answer last-known values
// (Decision.Stale): when Redis is slow, the candidates are degraded.
// Close releases the connections.
func NewDirect(redisURL string, opts Options, d DirectOptions) (*Client, error) {
	rdb, err := redisconn.Open(redisURL, func(opt *rueidis.ClientOption) {
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
	c.read = newDirect(rdb, d, c.now).read
	c.close = rdb.Close
	return c, nil
}

// direct reads counts from Redis with the counter's key layout.
type direct struct {
	rdb    rueidis.Client
	schema counting.Schema
	cached map[string]bool
	ttl    time.Duration
	now    func() time.Time
	// slots bounds the reads waiting on Redis: a hung Redis holds at most
	// this many goroutines, and the calls beyond decide at once.
	slots chan struct{}
}

// maxWindows is how many hour windows one item may ask for (the counter's
// limit too).
const maxWindows = 10

func newDirect(rdb rueidis.Client, o DirectOptions, now func() time.Time) *direct {
	s := o.Schema
	if len(s.Dimensions) == 0 {
		s.Dimensions = []string{"device", "bundle", "tagid"}
	}
	if len(s.Events) == 0 {
		s.Events = []string{"win", "billing", "imp"}
	}
	if s.MaxWindowHours == 0 {
		s.MaxWindowHours = 168
	}
	if s.MaxPaceWindowSec == 0 {
		s.MaxPaceWindowSec = 604800
	}
	cached := o.CachedDims
	if cached == nil {
		cached = []string{"bundle", "tagid"}
	}
	d := &direct{rdb: rdb, schema: s, cached: map[string]bool{}, ttl: o.CacheTTL,
		now: now, slots: make(chan struct{}, 256)}
	if d.ttl <= 0 {
		d.ttl = 10 * time.Second
	}
	for _, dim := range cached {
		d.cached[dim] = true
	}
	return d
}

var errBusy = errors.New("freqcap client: every direct read is waiting on redis")

// check refuses what the counter refuses for a read item of /v1/freq/batch.
func (d *direct) check(it *counting.BatchItem) error {
	s := &d.schema
	switch {
	case !ids.ValidCID(it.CID):
		return apierr.Invalid("cid must be %s", ids.CIDRule)
	case !slices.Contains(s.Events, it.Event):
		return apierr.Invalid("event must be one of %v", s.Events)
	case len(it.WindowHours) > maxWindows:
		return apierr.Invalid("windowHours takes at most %d windows", maxWindows)
	case it.PaceWindowSec < 0 || it.PaceWindowSec > s.MaxPaceWindowSec:
		return apierr.Invalid("paceWindowSec must be a whole number between 0 and %d", s.MaxPaceWindowSec)
	}
	for _, h := range it.WindowHours {
		if h < 1 || h > s.MaxWindowHours {
			return apierr.Invalid("windowHours must be between 1 and %d", s.MaxWindowHours)
		}
	}
	for dim, id := range it.Dims {
		if !slices.Contains(s.Dimensions, dim) {
			return apierr.Invalid("dims: unknown dimension %q (dimensions: %v)", dim, s.Dimensions)
		}
		if !ids.ValidID(id) {
			return apierr.Invalid("dims.%s must be %s", dim, ids.IDRule)
		}
	}
	return nil
}

// cmdSpan is where one counter's commands sit in the cached or the direct
// list, and where its answer goes.
type cmdSpan struct {
	cached   bool
	from, to int
	item     int // the batch item
	dim      string
	counter  counting.Item
	window   int // index into WindowHours for an hours counter
}

// read answers every item as /v1/freq/batch does, from Redis.
func (d *direct) read(ctx context.Context, req *counting.BatchRequest) ([]counting.Answer, error) {
	now := d.now()
	hour := now.Unix() / 3600
	b := d.rdb.B()
	out := make([]counting.Answer, len(req.Items))
	var cached []rueidis.CacheableTTL
	var plain rueidis.Commands
	var spans []cmdSpan
	// place puts a counter's commands on the cached or the plain list and
	// says where they are.
	place := func(sp cmdSpan, cmds []rueidis.Cacheable, cacheable bool) cmdSpan {
		if cacheable && d.cached[sp.dim] {
			sp.cached, sp.from = true, len(cached)
			for _, c := range cmds {
				cached = append(cached, rueidis.CT(c, d.ttl))
			}
			sp.to = len(cached)
		} else {
			sp.from = len(plain)
			for _, c := range cmds {
				plain = append(plain, rueidis.Completed(c))
			}
			sp.to = len(plain)
		}
		return sp
	}
	for i := range req.Items {
		bi := req.Items[i]
		if bi.Event == "" {
			bi.Event = d.schema.Events[0]
		}
		a := &out[i]
		*a = counting.Answer{CID: bi.CID, Event: bi.Event, WindowHours: bi.WindowHours, PaceWindowSec: bi.PaceWindowSec,
			Counts: make(map[string]counting.Counts, len(bi.Dims))}
		if err := d.check(&bi); err != nil {
			// The counter refuses the whole batch (400); so does this.
			return nil, fmt.Errorf("freqcap client: items[%d].%w", i, err)
		}
		scope := counting.Scope{Campaign: bi.CID, Event: bi.Event}
		for dim, id := range bi.Dims {
			subj := counting.Subject{Dim: dim, ID: id}
			day := counting.Item{Scope: scope, Subject: subj, Spec: counting.Spec{Kind: counting.Day, Span: 1}}
			cmds, ok := keyspace.ReadWindow(b, &day)
			spans = append(spans, place(cmdSpan{item: i, dim: dim, counter: day}, cmds, ok))
			if len(bi.WindowHours) > 0 {
				// One HGETALL answers every window.
				it := counting.Item{Scope: scope, Subject: subj, Spec: counting.Spec{Kind: counting.Hours}}
				read := place(cmdSpan{item: i, dim: dim, counter: it}, []rueidis.Cacheable{keyspace.ReadHours(b, &it)}, true)
				for w, h := range bi.WindowHours {
					sp := read
					sp.counter.Spec.Span, sp.window = int64(h), w
					spans = append(spans, sp)
				}
			}
			if bi.PaceWindowSec > 0 {
				it := counting.Item{Scope: scope, Subject: subj, Spec: counting.Spec{Kind: counting.Sliding, Span: int64(bi.PaceWindowSec)}}
				spans = append(spans, place(cmdSpan{item: i, dim: dim, counter: it}, keyspace.ReadSliding(b, &it, now.UnixMilli()), false))
			}
		}
	}
	if len(spans) == 0 {
		return out, nil
	}
	cachedRes, plainRes, err := d.send(ctx, cached, plain)
	if err != nil {
		return nil, err
	}
	var memo keyspace.HoursMemo
	for _, sp := range spans {
		a := &out[sp.item]
		if a.Code != apierr.OK {
			continue // one counter of the item failed: the item is degraded
		}
		rs := plainRes
		if sp.cached {
			rs = cachedRes
		}
		rs = rs[sp.from:sp.to]
		var r counting.Result
		err := firstErr(rs)
		if err == nil {
			err = got(&sp.counter, hour, &memo, rs, &r)
		}
		if err != nil {
			a.Code, a.Msg, a.Degraded = apierr.CodeOf(err), "counts unavailable: "+err.Error(), true
			continue
		}
		c := a.Counts[sp.dim]
		switch sp.counter.Spec.Kind {
		case counting.Day:
			c.Day = r.Count
		case counting.Hours:
			if c.Windows == nil {
				c.Windows = make(map[string]int64, len(a.WindowHours))
			}
			c.Windows[strconv.Itoa(a.WindowHours[sp.window])] = r.Count
		case counting.Sliding:
			c.Pace = &counting.Pace{Count: r.Count, LastAt: r.LastAt}
		}
		a.Counts[sp.dim] = c
	}
	return out, nil
}

// got decodes one counter's answers.
func got(it *counting.Item, hour int64, memo *keyspace.HoursMemo, rs []rueidis.RedisResult, r *counting.Result) error {
	switch it.Spec.Kind {
	case counting.Day:
		return keyspace.GotWindow(rs, r)
	case counting.Hours:
		return memo.Got(rs, hour, it.Spec.Span, r)
	default:
		return keyspace.GotSliding(rs, r)
	}
}

// send runs both command lists at once (one pipelined round trip per node
// each) and returns by ctx's deadline whatever Redis does; the error is
// that of the call as a whole, each result carries its own.
func (d *direct) send(ctx context.Context, cached []rueidis.CacheableTTL, plain rueidis.Commands) ([]rueidis.RedisResult, []rueidis.RedisResult, error) {
	select {
	case d.slots <- struct{}{}:
	default:
		return nil, nil, errBusy
	}
	var c, p []rueidis.RedisResult
	done := make(chan struct{})
	go func() {
		defer func() { <-d.slots }()
		defer close(done)
		var wg sync.WaitGroup
		if len(cached) > 0 {
			wg.Go(func() { c = d.rdb.DoMultiCache(ctx, cached...) })
		}
		if len(plain) > 0 {
			p = d.rdb.DoMulti(ctx, plain...)
		}
		wg.Wait()
	}()
	select {
	case <-done:
		return c, p, nil
	case <-ctx.Done():
		// rueidis may block past the context while it reconnects; the
		// deadline wins.
		return nil, nil, fmt.Errorf("freqcap client: redis: %w", ctx.Err())
	}
}

// firstErr is the first error of rs that is not a nil reply.
func firstErr(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
	}
	return nil
}

// FetchSchema reads what the counter at counterURL counts (GET /v1/schema),
// for DirectOptions.Schema; token is its bearer token, empty for none.
func FetchSchema(ctx context.Context, counterURL, token string) (counting.Schema, error) {
	var s counting.Schema
	u, err := url.Parse(counterURL)
	if err != nil || u.Host == "" {
		return s, fmt.Errorf("freqcap client: counter URL must be http(s)://host:port, got %q", counterURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("/v1/schema").String(), nil)
	if err != nil {
		return s, err
	}
	resp, err := withToken(nil, http.DefaultTransport, token).Do(req)
	if err != nil {
		return s, fmt.Errorf("freqcap client: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("freqcap client: GET /v1/schema answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("freqcap client: GET /v1/schema: %w", err)
	}
	return s, nil
}
