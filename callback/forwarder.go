package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// notice is one accepted notice waiting to be counted.
type notice struct {
	event    string
	cid      string
	eid      string
	dims     map[string]string // dimension -> id, the ones the notice gave
	accepted time.Time
}

// Forwarder drains the queue of accepted notices to the counter's
// POST /v1/incr/batch with a pool of workers: each takes up to BatchSize
// notices (waiting at most BatchWait for more after the first), resolves
// each notice's campaign once, and sends them in one request answered per
// item. A batch that failed as a whole (network, 5xx) and the items the
// counter could not write (10001/10004) are retried with exponential
// backoff and jitter, with the same event ids; an item the counter refuses
// (10003) is dropped alone. Every notice ends counted, or dropped with a
// reason in a metric and a rate-limited log line.
type Forwarder struct {
	queue     chan notice
	client    *http.Client
	incrURL   string
	campaigns *Campaigns
	log       *slog.Logger
	metrics   *metrics
	s         Settings

	ctx      context.Context // canceled when the drain time is up
	cancel   context.CancelFunc
	workers  sync.WaitGroup
	closed   atomic.Bool
	mu       sync.RWMutex // held for reading while enqueueing, for writing to close the queue
	shutdown atomic.Int64 // notices dropped because the drain time ran out
	unlogged atomic.Int64 // notices dropped since the last log line
	dropLog  rate.Sometimes
}

func newForwarder(s Settings, campaigns *Campaigns, log *slog.Logger) *Forwarder {
	ctx, cancel := context.WithCancel(context.Background())
	return &Forwarder{
		queue: make(chan notice, s.QueueSize),
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        s.Workers,
			MaxIdleConnsPerHost: s.Workers,
			IdleConnTimeout:     90 * time.Second,
		}},
		incrURL:   s.Counter.JoinPath("/v1/incr/batch").String(),
		campaigns: campaigns,
		log:       log,
		s:         s,
		ctx:       ctx,
		cancel:    cancel,
		dropLog:   rate.Sometimes{Interval: time.Second},
	}
}

// Depth is the number of notices waiting.
func (f *Forwarder) Depth() int { return len(f.queue) }

// Enqueue queues n without blocking; false means the queue is full or
// closed and the notice must be refused.
func (f *Forwarder) Enqueue(n notice) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return false
	}
	select {
	case f.queue <- n:
		return true
	default:
		return false
	}
}

// Start launches the workers.
func (f *Forwarder) Start() {
	for range f.s.Workers {
		f.workers.Go(func() {
			for {
				batch, ok := f.take()
				if len(batch) > 0 {
					f.deliver(batch)
				}
				if !ok {
					return
				}
			}
		})
	}
}

// take waits for a notice, then gathers up to BatchSize within BatchWait;
// false once the queue is closed and empty.
func (f *Forwarder) take() ([]notice, bool) {
	n, ok := <-f.queue
	if !ok {
		return nil, false
	}
	batch := append(make([]notice, 0, f.s.BatchSize), n)
	timer := time.NewTimer(f.s.BatchWait)
	defer timer.Stop()
	for len(batch) < f.s.BatchSize {
		select {
		case n, ok := <-f.queue:
			if !ok {
				return batch, false
			}
			batch = append(batch, n)
		case <-timer.C:
			return batch, true
		}
	}
	return batch, true
}

// Drain closes the queue and lets the workers deliver what is in it for up
// to timeout; what is left then is dropped, counted and returned.
func (f *Forwarder) Drain(timeout time.Duration) int {
	f.mu.Lock()
	f.closed.Store(true)
	close(f.queue)
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		f.cancel()
		<-done
	}
	f.cancel()
	return int(f.shutdown.Load())
}

// errRejected marks a 4xx answer: the counter will never accept the notice.
var errRejected = errors.New("counter rejected the notice")

func (f *Forwarder) deliver(batch []notice) {
	if f.ctx.Err() != nil {
		for _, n := range batch {
			f.drop(n, "shutdown", f.ctx.Err())
		}
		return
	}
	items := f.items(batch)
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval = f.s.RetryInitial
	eb.MaxInterval = f.s.RetryMax
	pending := batch
	_, err := backoff.Retry(f.ctx, func() (struct{}, error) {
		var err error
		pending, items, err = f.attempt(pending, items)
		if err == nil && len(pending) > 0 {
			err = fmt.Errorf("%d of the batch not written yet", len(pending))
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(eb),
		backoff.WithMaxElapsedTime(f.s.RetryFor),
		backoff.WithNotify(func(err error, wait time.Duration) {
			f.metrics.retries.Inc()
			f.log.Debug("forward failed, retrying", "notices", len(pending), "in", wait, "err", err)
		}))
	if err == nil {
		return
	}
	reason := "retries_exhausted"
	if f.ctx.Err() != nil {
		reason = "shutdown"
	}
	for _, n := range pending {
		f.drop(n, reason, err)
	}
}

// items resolves each notice's campaign (once) and builds its write.
func (f *Forwarder) items(batch []notice) []counting.BatchItem {
	items := make([]counting.BatchItem, len(batch))
	for i, n := range batch {
		it := counting.BatchItem{CID: n.cid, Event: n.event, Dims: n.dims, EID: n.eid}
		camp := f.campaign(n)
		if camp.WinLimitHours > 0 {
			it.WindowHours = []int{camp.WinLimitHours}
		}
		it.PaceWindowSec = camp.PaceWindowSec
		items[i] = it
	}
	return items
}

// campaign looks a notice's campaign up, retrying Redis errors for up to
// the forward timeout; an unknown or unreadable campaign counts the day
// only.
func (f *Forwarder) campaign(n notice) Campaign {
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
		f.metrics.unknownCampaigns.Inc()
		f.log.Debug("unknown campaign, counting the day only", "cid", n.cid)
	case err != nil:
		f.log.Warn("campaign unreadable, counting the day only", "cid", n.cid, "known", known, "err", err)
	}
	return camp
}

var errUnknown = errors.New("unknown campaign")

// drop counts a notice that will never be counted: a metric each, and a
// log line at most once a second with how many were dropped since the
// last one and the latest of them.
func (f *Forwarder) drop(n notice, reason string, err error) {
	if reason == "shutdown" {
		f.shutdown.Add(1)
	}
	f.metrics.dropped.WithLabelValues(reason).Inc()
	f.unlogged.Add(1)
	f.dropLog.Do(func() {
		f.log.Warn("notices dropped", "count", f.unlogged.Swap(0), "reason", reason, "event", n.event, "cid", n.cid, "eid", n.eid, "err", err)
	})
}

// attempt sends one batch and sorts its answers: counted and duplicate
// notices are done, refused ones dropped, the rest returned with their
// items to send again. An error means the batch failed as a whole.
func (f *Forwarder) attempt(batch []notice, items []counting.BatchItem) ([]notice, []counting.BatchItem, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	body, err := json.Marshal(counting.BatchRequest{Items: items})
	if err != nil {
		return batch, items, backoff.Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.incrURL, bytes.NewReader(body))
	if err != nil {
		return batch, items, backoff.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(req)
	if err != nil {
		return batch, items, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return batch, items, err
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("counter answered %d %s", resp.StatusCode, bytes.TrimSpace(b))
		if resp.StatusCode < 500 {
			// The batch itself was refused: no item of it will ever be.
			for _, n := range batch {
				f.drop(n, "counter_rejected", err)
			}
			return nil, nil, nil
		}
		return batch, items, err
	}
	var a counting.BatchResponse
	if err := json.Unmarshal(b, &a); err != nil || len(a.Results) != len(batch) {
		return batch, items, fmt.Errorf("counter answer of %d results for %d items: %v", len(a.Results), len(batch), err)
	}
	var again []notice
	var againItems []counting.BatchItem
	for i, r := range a.Results {
		n := batch[i]
		switch {
		case r.Code == 0:
			f.metrics.forwardDuration.Observe(time.Since(n.accepted).Seconds())
			if r.Duplicate {
				f.metrics.forwarded.WithLabelValues("duplicate").Inc()
			} else {
				f.metrics.forwarded.WithLabelValues("counted").Inc()
			}
		case r.Code == apierr.InvalidArgument:
			f.drop(n, "counter_rejected", fmt.Errorf("%w: %s", errRejected, r.Msg))
		default:
			again, againItems = append(again, n), append(againItems, items[i])
		}
	}
	return again, againItems, nil
}
