package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gojson "github.com/goccy/go-json"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/counting"
)

// notice is one accepted notice.
type notice struct {
	event string
	cid   string
	crid  string // the creative, when the notice names one
	eid   string
	dims  map[string]string // dimension -> id, the ones the notice gave
	// unreserved: the notice's URL says its bid was not reserved (rsv=0):
	// a win ends no reservation (no release part in its runs).
	unreserved bool
	accepted   time.Time
	// exp is when a signed notice's URL expires (zero when unsigned): the
	// journal takes it once until then.
	exp time.Time
}

// Forwarder delivers the journal's notices to the counter's
// POST /v1/incr/batch. A reader per partition takes new entries in
// batches of up to BatchSize (waiting BatchWait for more after a short
// read), a claimer takes entries other instances left idle for ClaimIdle,
// a combiner joins what they read into batches of up to BatchSize across
// partitions (waiting at most BatchWait after the first entry), and a pool
// of workers delivers each batch: it resolves each notice's
// campaign once, sends the batch as one request answered per item, and
// acknowledges (deletes) every entry the counter answered for. A batch that
// failed as a whole (network, 5xx, and any 4xx: credentials, a batch over
// the counter's limit, which also halves the batch) and the items the
// counter could not write (10001/10004) are retried with exponential
// backoff and jitter, with the same event ids. An item the counter refuses
// (10003) is sent again with the counter's newest schema when that
// changes it (its unknown dimensions left out), else dropped alone, with
// its reason in a metric and a rate-limited log line. What is still
// undelivered after RetryFor, or when callback stops, stays in the journal
// for the next claim.
type Forwarder struct {
	journal   *Journal
	schema    *Schema
	reads     chan []entry // what the readers and the claimer took
	batches   chan []entry // what the combiner made of it
	client    *http.Client
	incrURL   string
	campaigns *Campaigns
	log       *slog.Logger
	metrics   *metrics
	s         Settings

	readCtx    context.Context // canceled to stop reading and claiming
	stopRead   context.CancelFunc
	ctx        context.Context // canceled when the drain time is up
	cancel     context.CancelFunc
	readers    sync.WaitGroup
	workers    sync.WaitGroup
	left       atomic.Int64 // entries given back to the journal at shutdown
	unlogged   atomic.Int64 // notices dropped since the last log line
	dropLog    rate.Sometimes
	readLog    rate.Sometimes
	releaseLog rate.Sometimes
	retryLog   rate.Sometimes
	clampLog   rate.Sometimes
	refusedLog rate.Sometimes
	deadLog    rate.Sometimes
}

func newForwarder(s Settings, journal *Journal, schema *Schema, campaigns *Campaigns, log *slog.Logger) *Forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	readCtx, stopRead := context.WithCancel(ctx)
	return &Forwarder{
		journal: journal,
		schema:  schema,
		reads:   make(chan []entry),
		batches: make(chan []entry),
		client: &http.Client{Transport: auth.Transport(s.CounterToken, &http.Transport{
			MaxIdleConns:        s.Workers,
			MaxIdleConnsPerHost: s.Workers,
			IdleConnTimeout:     90 * time.Second,
		})},
		incrURL:    s.Counter.JoinPath("/v1/incr/batch").String(),
		campaigns:  campaigns,
		log:        log,
		s:          s,
		readCtx:    readCtx,
		stopRead:   stopRead,
		ctx:        ctx,
		cancel:     cancel,
		dropLog:    rate.Sometimes{Interval: time.Second},
		readLog:    rate.Sometimes{Interval: 5 * time.Second},
		releaseLog: rate.Sometimes{Interval: 5 * time.Second},
		retryLog:   rate.Sometimes{Interval: 5 * time.Second},
		clampLog:   rate.Sometimes{Interval: time.Minute},
		refusedLog: rate.Sometimes{Interval: 5 * time.Second},
		deadLog:    rate.Sometimes{Interval: time.Second},
	}
}

// Start launches the readers, the claimer and the workers.
func (f *Forwarder) Start() {
	for p := range f.journal.keys {
		f.readers.Go(func() { f.read(p) })
	}
	f.readers.Go(f.claim)
	f.readers.Go(func() { f.journal.KeepSampling(f.readCtx) })
	f.workers.Go(f.combine)
	for range f.s.Workers {
		f.workers.Go(func() {
			for b := range f.batches {
				f.deliver(b)
			}
		})
	}
}

// read takes partition p's new entries and hands them to the workers. A
// batch that waits for a worker waits in the journal: once read it is
// pending with this instance, and claimed by another if it waits too long.
//
// A read that found a short batch is followed by a moment's wait
// (BatchWait) for the next notices to join, then a read that does not
// block: at a steady rate below a full batch per BatchWait, one
// XREADGROUP per batch, not two (a blocking read that wakes on the first
// new notice, then the read after the wait). Only a read that found
// nothing blocks.
func (f *Forwarder) read(p int) {
	fail := f.newBackOff()
	block := true
	for f.readCtx.Err() == nil {
		es, err := f.readOnce(p, block)
		if err != nil && f.readCtx.Err() == nil {
			f.readLog.Do(func() { f.log.Warn("journal read failed, retrying", "partition", f.journal.keys[p], "err", err) })
			if !sleep(f.readCtx, fail.NextBackOff()) {
				return
			}
		} else {
			fail.Reset()
		}
		block = f.s.BatchWait <= 0 || len(es) == 0 || len(es) >= f.s.BatchSize
		if len(es) == 0 {
			continue
		}
		select {
		case f.reads <- es:
		case <-f.readCtx.Done():
			return
		}
	}
}

// readOnce is one read of read's: blocking for up to a second, then (a
// short batch) the wait and a second read; or, after a short batch, the
// wait and a read that does not block.
func (f *Forwarder) readOnce(p int, block bool) ([]entry, error) {
	if !block {
		if !sleep(f.readCtx, f.s.BatchWait) {
			return nil, f.readCtx.Err()
		}
		return f.journal.Read(f.readCtx, p, f.s.BatchSize, 0)
	}
	es, err := f.journal.Read(f.readCtx, p, f.s.BatchSize, time.Second)
	if err == nil && len(es) > 0 && len(es) < f.s.BatchSize && f.s.BatchWait > 0 {
		// The first notices after a quiet spell: give the next a moment to
		// join them.
		if !sleep(f.readCtx, f.s.BatchWait) {
			return es, nil
		}
		var more []entry
		more, err = f.journal.Read(f.readCtx, p, f.s.BatchSize-len(es), 0)
		es = append(es, more...)
	}
	return es, err
}

// combine joins what the readers and the claimer took into batches of up
// to BatchSize for the workers, sending one at the latest BatchWait after
// its first entry came. With several partitions, each read holds a few
// notices at a moderate rate; a request per read would cost the counter,
// callback and Redis a round trip per few notices. It closes the workers'
// channel once the readers' is closed and what it held is handed on.
func (f *Forwarder) combine() {
	defer close(f.batches)
	var acc []entry
	var due <-chan time.Time
	var timer *time.Timer
	for {
		select {
		case es, ok := <-f.reads:
			if !ok {
				if len(acc) > 0 {
					f.batches <- acc
				}
				return
			}
			acc = append(acc, es...)
			for len(acc) >= f.s.BatchSize {
				f.batches <- acc[:f.s.BatchSize:f.s.BatchSize]
				acc = slices.Clone(acc[f.s.BatchSize:])
			}
			switch {
			case len(acc) == 0:
				due = nil
			case f.s.BatchWait <= 0:
				f.batches <- acc
				acc, due = nil, nil
			case due == nil:
				if timer == nil {
					timer = time.NewTimer(f.s.BatchWait)
				} else {
					timer.Reset(f.s.BatchWait)
				}
				due = timer.C
			}
		case <-due:
			f.batches <- acc
			acc, due = nil, nil
		}
	}
}

// claim takes, every half claim time, the entries any instance (this one
// included) left pending for longer than the claim time, and now and then
// forgets consumers of earlier runs that hold nothing.
func (f *Forwarder) claim() {
	every := max(f.s.ClaimIdle/2, 50*time.Millisecond)
	lastForget := time.Time{}
	for sleep(f.readCtx, every) {
		for p := range f.journal.keys {
			for start := "0-0"; ; {
				es, next, err := f.journal.Claim(f.readCtx, p, f.s.ClaimIdle, start, f.s.BatchSize)
				if err != nil {
					if f.readCtx.Err() == nil {
						f.readLog.Do(func() { f.log.Warn("journal claim failed", "partition", f.journal.keys[p], "err", err) })
					}
					break
				}
				if len(es) > 0 {
					f.metrics.claimed.Add(float64(len(es)))
					select {
					case f.reads <- es:
					case <-f.readCtx.Done():
						return
					}
				}
				if next == "0-0" {
					break
				}
				start = next
			}
		}
		if time.Since(lastForget) > 10*time.Minute {
			lastForget = time.Now()
			if n, err := f.journal.Forget(f.readCtx, time.Hour); err == nil && n > 0 {
				f.log.Info("journal: forgot idle consumers of earlier runs", "count", n)
			}
		}
	}
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *Forwarder) newBackOff() *backoff.ExponentialBackOff {
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval = f.s.RetryInitial
	eb.MaxInterval = f.s.RetryMax
	return eb
}

// Drain stops reading, lets the workers finish the batches they hold for
// up to timeout, and returns how many entries were given back to the
// journal undelivered (another instance, or the next run, claims them).
func (f *Forwarder) Drain(timeout time.Duration) int {
	f.stopRead()
	f.readers.Wait()
	close(f.reads) // the combiner hands on what it holds and closes f.batches
	done := make(chan struct{})
	go func() { f.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		f.cancel()
		<-done
	}
	f.cancel()
	return int(f.left.Load())
}

// errRejected marks an item the counter refused: it will never accept it.
var errRejected = errors.New("counter rejected the notice")

// deliver sends one batch until every entry is answered
// for, acknowledging as it goes; what is left after RetryFor (or at
// shutdown) stays pending in the journal.
func (f *Forwarder) deliver(batch []entry) {
	// The counter's schema decides which parameters are dimensions.
	sch, err := backoff.Retry(f.ctx, func() (*counting.Schema, error) {
		ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
		defer cancel()
		return f.schema.Need(ctx)
	}, backoff.WithBackOff(f.newBackOff()), backoff.WithMaxElapsedTime(f.retryFor(nil)))
	if err != nil {
		f.giveBack(batch, err)
		return
	}
	pending := f.sift(sch, batch)
	if len(pending) == 0 {
		return
	}
	// At most what the counter takes in one request; halved while the
	// counter refuses a whole request (a limit lowered since the schema
	// was read).
	d := &delivery{f: f, sch: sch, pending: pending, items: f.items(sch, pending), size: f.s.BatchSize}
	if sch.MaxBatch > 0 {
		d.size = min(d.size, sch.MaxBatch)
	}
	touched := time.Now()
	_, err = backoff.Retry(f.ctx, func() (struct{}, error) { return struct{}{}, d.round() },
		backoff.WithBackOff(f.newBackOff()),
		backoff.WithMaxElapsedTime(f.retryFor(sch)),
		backoff.WithNotify(func(err error, wait time.Duration) {
			f.metrics.retries.Inc()
			f.retryLog.Do(func() {
				f.log.Warn("counter write failed, retrying: the notices stay in the journal until written",
					"notices", len(d.pending), "next_in", wait, "err", err)
			})
			if time.Since(touched) > f.s.ClaimIdle/3 {
				// Still ours: keep other instances from claiming the batch.
				touched = time.Now()
				_ = f.journal.Touch(f.ctx, d.pending)
			}
		}))
	if err == nil || len(d.pending) == 0 {
		return
	}
	f.giveBack(d.pending, err)
}

// sift keeps the entries of batch the schema lets through, each with the
// dimensions the counter counts, and drops (acknowledging) the others.
func (f *Forwarder) sift(sch *counting.Schema, batch []entry) []entry {
	var pending, refused []entry
	for _, e := range batch {
		if e.bad != nil {
			f.drop(e, "malformed", e.bad)
			refused = append(refused, e)
			continue
		}
		dims, rej := pickDimensions(sch, e.n.dims)
		if rej != nil {
			f.drop(e, rej.reason, rej.err)
			refused = append(refused, e)
			continue
		}
		e.n.dims = dims
		pending = append(pending, e)
	}
	f.ackAll(refused)
	return pending
}

// delivery is one batch being delivered: the entries not answered for
// yet, their items, and the schema and request size it is sent with.
type delivery struct {
	f       *Forwarder
	sch     *counting.Schema
	pending []entry
	items   []counting.BatchItem
	size    int
}

// round sends what is pending in requests of at most size, acknowledges
// what the counter answered for, and keeps the rest for the next round;
// an error says the round left something to send again.
func (d *delivery) round() error {
	f := d.f
	var again []entry
	var againItems []counting.BatchItem
	var rejected []rejectedItem
	var failed error
	for from := 0; from < len(d.pending); from += d.size {
		to := min(from+d.size, len(d.pending))
		out, err := f.attempt(d.pending[from:to], d.items[from:to])
		if err != nil {
			var refused *refusedError
			if errors.As(err, &refused) {
				f.refused(refused, to-from)
				if refused.status == http.StatusBadRequest || refused.status == http.StatusRequestEntityTooLarge {
					d.size = max(1, (to-from)/2)
				}
			}
			again, againItems = append(again, d.pending[from:to]...), append(againItems, d.items[from:to]...)
			failed = err
			continue
		}
		f.ackAll(out.done)
		again, againItems = append(again, out.again...), append(againItems, out.againItems...)
		rejected = append(rejected, out.rejected...)
		if kept := f.bury(out.dead); len(kept) > 0 {
			// Not buried (Redis failed): they stay, and go again.
			again = append(again, kept...)
			againItems = append(againItems, f.items(d.sch, kept)...)
		}
	}
	if failed != nil {
		// Refused as a whole: the counter's settings may have changed.
		d.sch = f.schema.Fresh(f.ctx, d.sch)
	}
	if len(rejected) > 0 {
		var retried []entry
		d.sch, retried = f.rejected(d.sch, rejected)
		again = append(again, retried...)
		againItems = append(againItems, f.items(d.sch, retried)...)
	}
	d.pending, d.items = again, againItems
	switch {
	case failed != nil:
		return failed
	case len(d.pending) > 0:
		return fmt.Errorf("%d of the batch not written yet", len(d.pending))
	}
	return nil
}

// refused reports a counter request refused as a whole: its notices are
// sent again, and an operator must look (credentials, limits, address).
func (f *Forwarder) refused(err *refusedError, n int) {
	f.metrics.batchRefused.WithLabelValues(strconv.Itoa(err.status)).Inc()
	f.refusedLog.Do(func() {
		f.log.Error("counter refused a whole request: its notices stay in the journal and are sent again; check COUNTER_URL, COUNTER_TOKEN and the counter's limits",
			"notices", n, "status", err.status, "err", err)
	})
}

// bury moves entries no retry will write to the dead-letter stream, with
// a metric and a log line, and acknowledges them: their partition goes
// on. It returns the entries it could not move.
func (f *Forwarder) bury(dead []rejectedItem) []entry {
	if len(dead) == 0 {
		return nil
	}
	es, why := make([]entry, len(dead)), make([]string, len(dead))
	for i, d := range dead {
		es[i], why[i] = d.e, d.msg
	}
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	if err := f.journal.Bury(ctx, es, why); err != nil {
		f.retryLog.Do(func() {
			f.log.Warn("dead-letter stream unwritable: the notices stay in the journal", "count", len(es), "err", err)
		})
		return es
	}
	f.metrics.deadLettered.Add(float64(len(es)))
	f.deadLog.Do(func() {
		f.log.Error("notices moved to the dead-letter stream "+deadKey+": the counter cannot write them; list and replay them on the admin API (/v1/deadletters)",
			"count", len(es), "cid", dead[0].e.n.cid, "eid", dead[0].e.n.eid, "err", dead[0].msg)
	})
	f.ackAll(es)
	return nil
}

// rejectedItem is a notice the counter refused (10003), with its answer.
type rejectedItem struct {
	e   entry
	msg string
}

// rejected settles the notices the counter refused one by one. A refusal
// may come from a schema newer than the one their write was built from
// (a dimension removed, a lower maximum window): with the newest schema,
// a notice is sent again with what the counter counts now, its unknown
// dimensions left out (and counted in a metric) and its good ones kept.
// Only a notice the newest schema does not change is dropped, with the
// counter's reason.
func (f *Forwarder) rejected(used *counting.Schema, rs []rejectedItem) (*counting.Schema, []entry) {
	sch := f.schema.Fresh(f.ctx, used)
	var again, dropped []entry
	for _, r := range rs {
		if sameSchema(sch, used) {
			f.drop(r.e, "counter_rejected", fmt.Errorf("%w: %s", errRejected, r.msg))
			dropped = append(dropped, r.e)
			continue
		}
		dims, rej := pickDimensions(sch, r.e.n.dims)
		if rej != nil {
			f.drop(r.e, rej.reason, rej.err)
			dropped = append(dropped, r.e)
			continue
		}
		for d := range r.e.n.dims {
			if _, kept := dims[d]; !kept {
				f.metrics.droppedDims.WithLabelValues(d).Inc()
			}
		}
		r.e.n.dims = dims
		again = append(again, r.e)
	}
	f.ackAll(dropped)
	return sch, again
}

// retryFor is how long one delivery retries: CALLBACK_RETRY_FOR, but less
// than the counter's dedupe window, so that a retry of a write whose
// answer was lost still finds its event id remembered and counts nothing
// twice (start-up refuses a longer setting when the counter is up; a
// counter that answers later with a shorter window shortens it here).
func (f *Forwarder) retryFor(sch *counting.Schema) time.Duration {
	if sch == nil {
		sch = f.schema.Get()
	}
	if sch == nil || sch.DedupeTTLSec <= 0 {
		return f.s.RetryFor
	}
	if safe := safeRetryFor(sch); f.s.RetryFor > safe {
		f.clampLog.Do(func() {
			f.log.Error("CALLBACK_RETRY_FOR is longer than half the counter's dedupe window: retrying for less", "CALLBACK_RETRY_FOR", f.s.RetryFor, "retrying_for", safe, "dedupe_ttl_sec", sch.DedupeTTLSec)
		})
		return safe
	}
	return f.s.RetryFor
}

// safeRetryFor is the longest retry a counter's dedupe window allows:
// half of it, leaving the other half for a claim by another instance.
func safeRetryFor(sch *counting.Schema) time.Duration {
	return time.Duration(sch.DedupeTTLSec) * time.Second / 2
}

// giveBack leaves entries not delivered in the journal: for the next run
// or another instance at shutdown, else for the next claim.
func (f *Forwarder) giveBack(pending []entry, err error) {
	if f.ctx.Err() != nil {
		f.left.Add(int64(len(pending)))
		return
	}
	f.metrics.released.Add(float64(len(pending)))
	f.releaseLog.Do(func() {
		f.log.Warn("notices not delivered yet: left in the journal for the next claim", "count", len(pending), "retried_for", f.retryFor(f.schema.Get()), "err", err)
	})
}

// ackAll acknowledges entries, retrying briefly: an entry
// whose acknowledgement is lost is delivered again, and the counter answers
// its event id as a duplicate.
func (f *Forwarder) ackAll(done []entry) {
	if len(done) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(f.ctx), f.s.ForwardTimeout)
	defer cancel()
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		return struct{}{}, f.journal.Ack(ctx, done)
	}, backoff.WithBackOff(backoff.NewConstantBackOff(20*time.Millisecond)))
	if err != nil {
		f.readLog.Do(func() {
			f.log.Warn("journal acknowledgement failed: these notices will be delivered again", "count", len(done), "err", err)
		})
	}
}

// items resolves each notice's campaign (once) and builds its write.
func (f *Forwarder) items(sch *counting.Schema, batch []entry) []counting.BatchItem {
	items := make([]counting.BatchItem, len(batch))
	// A batch's notices are mostly of a few campaigns: each campaign, and
	// each parent's needs, is looked up once.
	memo := &lookups{camps: make(map[string]campaignLookup, 4), parents: map[[4]string]parentLookup{},
		needs: map[[2]string]map[string]campaign.Need{}, dims: map[[2]string][]string{}, own: map[[2]string]campaign.Need{}}
	for i, e := range batch {
		n := e.n
		it := counting.BatchItem{CID: n.cid, Event: n.event, Dims: n.dims, EID: n.eid}
		look, ok := memo.camps[n.cid]
		if !ok {
			look = f.campaign(n)
			memo.camps[n.cid] = look
		}
		if look.unknown {
			f.metrics.unknownCampaigns.Inc()
		}
		camp := look.c
		if n.event == lossEvent {
			items[i] = lost(sch, n, &camp)
			continue
		}
		// A win ends its bid's reservation, in the same run as its count,
		// unless its URL says none was made.
		it.Release = len(sch.Events) > 0 && n.event == sch.Events[0] && !n.unreserved
		need := memo.ownNeed(n.cid, &camp, n.event)
		// A campaign stored beyond the counter's limits (while the counter
		// was away) is served at them.
		it.WindowHours, it.PaceWindowSec = windowsWithin(sch, need)
		it.Week, it.Month, it.Zone, it.Periods = need.Week, need.Month, camp.Timezone, need.PeriodList()
		if need.Lifetime {
			it.LifetimeEnd, _ = camp.EndUnix()
		}
		it.Levels = f.levels(sch, n, &camp, it.Release, memo)
		items[i] = it
	}
	return items
}

// lost is the write of a loss notice: the end of its bid's reservation
// at every level of its campaign, on each of its dimensions, nothing
// counted.
func lost(sch *counting.Schema, n notice, camp *Campaign) counting.BatchItem {
	it := counting.BatchItem{CID: n.cid, Dims: n.dims, EID: n.eid, Lost: true}
	if len(sch.Events) > 0 {
		it.Event = sch.Events[0]
	}
	dims := slices.Sorted(maps.Keys(n.dims))
	for _, l := range counting.Levels {
		if id := camp.LevelID(l, n.cid, n.crid); l != campaign.LevelCampaign && id != "" {
			it.Levels = append(it.Levels, counting.LevelCount{Level: l, ID: id, Dims: dims})
		}
	}
	return it
}

// windowsWithin are a need's hour window and exact window within the
// counter's limits.
func windowsWithin(sch *counting.Schema, need campaign.Need) ([]int, int) {
	var hours []int
	if h := min(need.Hours, sch.MaxWindowHours); h > 0 {
		hours = []int{h}
	}
	return hours, min(need.PaceSec, sch.MaxPaceWindowSec)
}

// levels are the other levels a notice counts at: its campaign's
// advertiser and io, in what the caps of all their campaigns need, and
// its creative, in what its campaign's creative caps need; each in the
// notice's dimensions those caps count.
func (f *Forwarder) levels(sch *counting.Schema, n notice, camp *Campaign, release bool, memo *lookups) []counting.LevelCount {
	var out []counting.LevelCount
	for _, l := range counting.Levels {
		id := camp.LevelID(l, n.cid, n.crid)
		if l == campaign.LevelCampaign || id == "" {
			continue
		}
		lc := f.levelCount(sch, n, camp, l, id, memo)
		if len(lc.Dims) > 0 {
			out = append(out, lc)
		}
		if !release {
			continue
		}
		// A win ends its bid's reservation on every dimension a cap of its
		// campaign reads at the level (where a bid is held: a cap of
		// another event may read one the win counts nothing on), and
		// only there: any other costs a script run per notice for nothing.
		rest := counting.LevelCount{Level: l, ID: id, Lost: true}
		for _, d := range memo.readDims(n.cid, camp, l) {
			if _, ok := n.dims[d]; ok && !slices.Contains(lc.Dims, d) {
				rest.Dims = append(rest.Dims, d)
			}
		}
		if len(rest.Dims) > 0 {
			out = append(out, rest)
		}
	}
	return out
}

// levelCount is what a notice counts at level l (id): the notice's
// dimensions the caps there count, in what they need.
func (f *Forwarder) levelCount(sch *counting.Schema, n notice, camp *Campaign, l, id string, memo *lookups) counting.LevelCount {
	need, zone := memo.levelNeeds(n.cid, camp, l)[n.event], camp.Timezone
	if l != campaign.LevelCreative {
		key := [4]string{l, id, n.event, zone}
		p, ok := memo.parents[key]
		if !ok {
			p.need, p.zone = f.parentNeed(l, id, n, zone)
			memo.parents[key] = p
		}
		need, zone = need.Union(p.need), p.zone
	}
	lc := counting.LevelCount{Level: l, ID: id, Week: need.Week, Month: need.Month, Zone: zone, Periods: need.PeriodList()}
	for _, d := range need.Dims {
		if _, ok := n.dims[d]; ok {
			lc.Dims = append(lc.Dims, d)
		}
	}
	lc.WindowHours, lc.PaceWindowSec = windowsWithin(sch, need)
	if need.Lifetime && l == campaign.LevelCreative {
		lc.LifetimeEnd, _ = camp.EndUnix()
	}
	return lc
}

// parentNeed reads what a notice must be counted in at a parent, retrying
// Redis errors for up to the forward timeout; when the index cannot be
// read, the notice is counted there in what its own campaign's caps need
// (logged).
func (f *Forwarder) parentNeed(level, id string, n notice, zone string) (campaign.Need, string) {
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	var need campaign.Need
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		var err error
		var z string
		if need, z, err = f.campaigns.ParentNeed(ctx, level, id, n.event); err == nil && len(need.Dims) > 0 {
			zone = z
		}
		return struct{}{}, err
	}, backoff.WithBackOff(backoff.NewConstantBackOff(20*time.Millisecond)))
	if err != nil {
		f.log.Warn("caps index unreadable: counting the notice at this level for its own campaign's caps only", "level", level, "id", id, "cid", n.cid, "err", err)
	}
	return need, zone
}

// campaign looks a notice's campaign up, retrying Redis errors for up to
// the forward timeout; an unknown or unreadable campaign counts the day
// only.
func (f *Forwarder) campaign(n notice) campaignLookup {
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	var known bool
	camp, err := backoff.Retry(ctx, func() (Campaign, error) {
		c, k, err := f.campaigns.Get(ctx, n.cid)
		known = k
		if err != nil && known {
			// A malformed campaign will not mend itself by retrying.
			return c, backoff.Permanent(err)
		}
		if err != nil {
			return c, err
		}
		if !known {
			return c, backoff.Permanent(errUnknown)
		}
		return c, nil
	}, backoff.WithBackOff(backoff.NewConstantBackOff(20*time.Millisecond)))
	switch {
	case errors.Is(err, errUnknown):
		f.log.Debug("unknown campaign, counting the day only", "cid", n.cid)
	case err != nil:
		f.log.Warn("campaign unreadable, counting the day only", "cid", n.cid, "known", known, "err", err)
	}
	return campaignLookup{c: camp, unknown: errors.Is(err, errUnknown)}
}

// lookups are what one batch's items looked up or worked out, each once:
// campaigns by cid, parents' needs by level, id, event and default zone,
// what a campaign's caps need at a level and the dimensions they read
// there (by cid and level), and what they need at its own (by cid and
// event).
type lookups struct {
	camps   map[string]campaignLookup
	parents map[[4]string]parentLookup
	needs   map[[2]string]map[string]campaign.Need
	dims    map[[2]string][]string
	own     map[[2]string]campaign.Need
}

// levelNeeds is campaign.Needs of campaign cid's caps at level l.
func (m *lookups) levelNeeds(cid string, camp *Campaign, l string) map[string]campaign.Need {
	k := [2]string{cid, l}
	ns, ok := m.needs[k]
	if !ok {
		ns = campaign.Needs(camp.Caps, l)
		m.needs[k] = ns
	}
	return ns
}

// readDims are the dimensions campaign cid's caps at level l read, of any
// event, sorted.
func (m *lookups) readDims(cid string, camp *Campaign, l string) []string {
	k := [2]string{cid, l}
	ds, ok := m.dims[k]
	if !ok {
		for _, need := range m.levelNeeds(cid, camp, l) {
			for _, d := range need.Dims {
				if !slices.Contains(ds, d) {
					ds = append(ds, d)
				}
			}
		}
		slices.Sort(ds)
		m.dims[k] = ds
	}
	return ds
}

// ownNeed is what campaign cid needs counted of event at its own level.
func (m *lookups) ownNeed(cid string, camp *Campaign, event string) campaign.Need {
	k := [2]string{cid, event}
	n, ok := m.own[k]
	if !ok {
		n = camp.Need(event)
		m.own[k] = n
	}
	return n
}

// parentLookup is what a parent's caps need counted, in its zone.
type parentLookup struct {
	need campaign.Need
	zone string
}

// campaignLookup is what a batch found of one campaign: the campaign, or
// that it is not in Redis (unknown_campaigns counts its notices).
type campaignLookup struct {
	c       Campaign
	unknown bool
}

var errUnknown = errors.New("unknown campaign")

// drop counts a notice that will never be counted: a metric each, and a
// log line at most once a second with how many were dropped since the
// last one and the latest of them.
func (f *Forwarder) drop(e entry, reason string, err error) {
	f.metrics.dropped.WithLabelValues(reason).Inc()
	f.unlogged.Add(1)
	f.dropLog.Do(func() {
		f.log.Warn("notices dropped", "count", f.unlogged.Swap(0), "reason", reason, "event", e.n.event, "cid", e.n.cid, "eid", e.n.eid, "err", err)
	})
}

// writeAnswers is what a delivery reads of the counter's answer to
// POST /v1/incr/batch (counting.BatchResponse): each item's outcome, not
// its counts.
type writeAnswers struct {
	Results []itemAnswer `json:"results"`
}

// itemAnswer is one item's outcome.
type itemAnswer struct {
	Code      int    `json:"code"`
	Msg       string `json:"msg"`
	Duplicate bool   `json:"duplicate"`
}

// attemptResult sorts a batch's answers: entries done (counted, or
// duplicate), entries to send again with their items (Redis could not
// write them), and entries the counter refused one by one.
type attemptResult struct {
	done       []entry
	again      []entry
	againItems []counting.BatchItem
	rejected   []rejectedItem
	dead       []rejectedItem // for the dead-letter stream
}

// refusedError is a counter request refused as a whole (4xx): a matter of
// configuration or transport (credentials, a batch over the counter's
// limit, a wrong address), never a verdict on the notices in it.
type refusedError struct {
	status int
	body   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("counter refused the request: %d %s", e.status, e.body)
}

// attempt sends one batch and sorts its answers. An error means the batch
// failed as a whole: every entry of it is to be sent again.
func (f *Forwarder) attempt(batch []entry, items []counting.BatchItem) (attemptResult, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	// Quiet: callback reads each item's code and duplicate, nothing else,
	// so the counter computes no counts.
	body, err := gojson.Marshal(counting.BatchRequest{Items: items, Quiet: true})
	if err != nil {
		return attemptResult{}, backoff.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.incrURL, bytes.NewReader(body))
	if err != nil {
		return attemptResult{}, backoff.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return attemptResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return attemptResult{}, err
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode < 500 {
			return attemptResult{}, &refusedError{status: resp.StatusCode, body: string(bytes.TrimSpace(b[:min(len(b), 300)]))}
		}
		return attemptResult{}, fmt.Errorf("counter answered %d %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	var a writeAnswers
	if err := gojson.Unmarshal(b, &a); err != nil || len(a.Results) != len(batch) {
		return attemptResult{}, fmt.Errorf("counter answer of %d results for %d items: %v", len(a.Results), len(batch), err)
	}
	return f.sort(batch, items, a.Results), nil
}

// sort sorts a batch by the counter's answers: done, rejected (invalid),
// dead (Redis refused it, or it failed in DeadLetterAfter answers that
// wrote others) and again.
func (f *Forwarder) sort(batch []entry, items []counting.BatchItem, results []itemAnswer) attemptResult {
	var out attemptResult
	duplicates := 0
	written := slices.ContainsFunc(results, func(r itemAnswer) bool { return r.Code == 0 })
	for i, r := range results {
		e := batch[i]
		switch {
		case r.Code == apierr.Internal:
			// Redis refused the item itself (a key of the wrong type):
			// retrying would block its partition for good.
			out.dead = append(out.dead, rejectedItem{e: e, msg: r.Msg})
			continue
		case r.Code != 0 && r.Code != apierr.InvalidArgument && written:
			if e.fails++; e.fails >= f.s.DeadLetterAfter {
				out.dead = append(out.dead, rejectedItem{e: e, msg: fmt.Sprintf("not written in %d answers that wrote others: %s", e.fails, r.Msg)})
				continue
			}
		}
		switch {
		case r.Code == 0:
			f.metrics.forwardDuration.Observe(time.Since(e.n.accepted).Seconds())
			if r.Duplicate {
				duplicates++
			}
			out.done = append(out.done, e)
		case r.Code == apierr.InvalidArgument:
			out.rejected = append(out.rejected, rejectedItem{e: e, msg: r.Msg})
		default:
			out.again, out.againItems = append(out.again, e), append(out.againItems, items[i])
		}
	}
	// Once per answer, not per notice: each label's lookup hashes it.
	if n := len(out.done) - duplicates; n > 0 {
		f.metrics.forwarded.WithLabelValues("counted").Add(float64(n))
	}
	if duplicates > 0 {
		f.metrics.forwarded.WithLabelValues("duplicate").Add(float64(duplicates))
	}
	return out
}
