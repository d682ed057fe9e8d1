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
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/counting"
)

// notice is one accepted notice waiting to be counted.
type notice struct {
	event    string
	cid      string
	eid      string
	query    string // cid, dimensions, event and eid, URL-encoded
	accepted time.Time
}

// Forwarder drains the queue of accepted notices to the counter's
// POST /v1/incr with a pool of workers, retrying network errors and 5xx
// with exponential backoff and jitter. Every notice ends counted, or
// dropped with a reason in a metric and a log line.
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
		incrURL:   s.Counter.JoinPath("/v1/incr").String(),
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
			for n := range f.queue {
				f.deliver(n)
			}
		})
	}
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

func (f *Forwarder) deliver(n notice) {
	if f.ctx.Err() != nil {
		f.drop(n, "shutdown", f.ctx.Err())
		return
	}
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval = f.s.RetryInitial
	eb.MaxInterval = f.s.RetryMax
	duplicate, err := backoff.Retry(f.ctx, func() (bool, error) { return f.attempt(n) },
		backoff.WithBackOff(eb),
		backoff.WithMaxElapsedTime(f.s.RetryFor),
		backoff.WithNotify(func(err error, wait time.Duration) {
			f.metrics.retries.Inc()
			f.log.Debug("forward failed, retrying", "cid", n.cid, "event", n.event, "in", wait, "err", err)
		}))
	switch {
	case err == nil:
		f.metrics.forwardDuration.Observe(time.Since(n.accepted).Seconds())
		if duplicate {
			f.metrics.forwarded.WithLabelValues("duplicate").Inc()
		} else {
			f.metrics.forwarded.WithLabelValues("counted").Inc()
		}
	case errors.Is(err, errRejected):
		f.drop(n, "counter_rejected", err)
	case f.ctx.Err() != nil:
		f.drop(n, "shutdown", err)
	default:
		f.drop(n, "retries_exhausted", err)
	}
}

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

// attempt looks the campaign up and sends one counting request. It reports
// whether the counter had seen the event id already.
func (f *Forwarder) attempt(n notice) (bool, error) {
	ctx, cancel := context.WithTimeout(f.ctx, f.s.ForwardTimeout)
	defer cancel()
	camp, known, err := f.campaigns.Get(ctx, n.cid)
	switch {
	case err != nil && known:
		// A malformed campaign in Redis will not mend itself by retrying:
		// count the day as for an unknown campaign, and say so.
		f.log.Warn("campaign unreadable, counting the day only", "cid", n.cid, "err", err)
	case err != nil:
		return false, fmt.Errorf("campaign lookup: %w", err)
	case !known:
		f.metrics.unknownCampaigns.Inc()
		f.log.Debug("unknown campaign, counting the day only", "cid", n.cid)
	}
	u := f.incrURL + "?" + n.query
	if camp.WinLimitHours > 0 {
		u += "&windowHours=" + strconv.Itoa(camp.WinLimitHours)
	}
	if camp.PaceWindowSec > 0 {
		u += "&paceWindowSec=" + strconv.Itoa(camp.PaceWindowSec)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return false, backoff.Permanent(err)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return false, err
	}
	switch {
	case resp.StatusCode < 300:
		var a counting.Answer
		if err := json.Unmarshal(body, &a); err != nil {
			return false, fmt.Errorf("counter answer: %w", err)
		}
		return a.Duplicate, nil
	case resp.StatusCode < 500:
		return false, backoff.Permanent(fmt.Errorf("%w: %d %s", errRejected, resp.StatusCode, bytes.TrimSpace(body)))
	default:
		return false, fmt.Errorf("counter answered %d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
}
