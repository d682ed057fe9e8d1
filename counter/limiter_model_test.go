package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// Reference models of the rate limiters, in plain Go on an injected clock
// (unix ms). Each answers a hit of some cost; only when commit is set and
// the hit is admitted does it consume. Retry-after is not part of a model:
// the test finds it by asking the model at every later millisecond.

type modelAnswer struct {
	allowed          bool
	never            bool // the cost is above what the limiter can ever hold
	remaining        int64
	resetUs, delayUs int64
}

type limiterModel interface {
	decide(nowMs, cost int64, commit bool) modelAnswer
}

// fixedWindowModel counts admitted units per epoch-aligned window.
type fixedWindowModel struct {
	limit, period int64
	used          map[int64]int64 // window start -> units
}

func (m *fixedWindowModel) decide(now, cost int64, commit bool) modelAnswer {
	start := now / m.period * m.period
	used := m.used[start]
	a := modelAnswer{remaining: m.limit - used}
	resetAt := func(n int64) int64 {
		if n == 0 {
			return 0
		}
		return (start + m.period - now) * 1000
	}
	a.resetUs = resetAt(used)
	if cost > m.limit {
		a.never = true
		return a
	}
	if used+cost > m.limit {
		return a
	}
	a.allowed, a.remaining, a.resetUs = true, m.limit-used-cost, resetAt(used+cost)
	if commit {
		m.used[start] += cost
	}
	return a
}

// slidingLogModel keeps the admission time of every unit.
type slidingLogModel struct {
	limit, period int64
	log           []int64
}

func (m *slidingLogModel) decide(now, cost int64, commit bool) modelAnswer {
	var live []int64
	for _, at := range m.log {
		if now-at < m.period {
			live = append(live, at)
		}
	}
	used := int64(len(live))
	a := modelAnswer{remaining: m.limit - used}
	if used > 0 {
		a.resetUs = (slices.Max(live) + m.period - now) * 1000
	}
	if cost > m.limit {
		a.never = true
		return a
	}
	if used+cost > m.limit {
		return a
	}
	a.allowed, a.remaining = true, m.limit-used-cost
	if cost > 0 {
		a.resetUs = m.period * 1000
	}
	if commit {
		for range cost {
			live = append(live, now)
		}
		m.log = live
	}
	return a
}

// slidingWindowModel counts per fixed window and estimates the sliding
// period as the current count plus the previous one weighted by overlap.
type slidingWindowModel struct {
	limit, period int64
	count         map[int64]int64 // window index -> units
}

func (m *slidingWindowModel) decide(now, cost int64, commit bool) modelAnswer {
	w := now / m.period
	cur, prev := m.count[w], m.count[w-1]
	elapsed := now - w*m.period
	est := prev*(m.period-elapsed)/m.period + cur
	reset := func(cur int64) int64 {
		switch {
		case cur > 0:
			return ((w+2)*m.period - now) * 1000
		case prev > 0:
			return ((w+1)*m.period - now) * 1000
		}
		return 0
	}
	a := modelAnswer{remaining: m.limit - est, resetUs: reset(cur)}
	if cost > m.limit {
		a.never = true
		return a
	}
	if est+cost > m.limit {
		return a
	}
	a.allowed, a.remaining, a.resetUs = true, m.limit-est-cost, reset(cur+cost)
	if commit {
		m.count[w] += cost
	}
	return a
}

// leakyBucketModel is a queue: each admitted unit is served for one
// interval after the one before it; a unit is queued until its service
// ends.
type leakyBucketModel struct {
	interval, capacity int64 // µs per unit, units queued at most
	ends               []int64
}

func (m *leakyBucketModel) decide(nowMs, cost int64, commit bool) modelAnswer {
	now := nowMs * 1000
	var queued []int64
	for _, e := range m.ends {
		if e > now {
			queued = append(queued, e)
		}
	}
	last := now
	if len(queued) > 0 {
		last = queued[len(queued)-1]
	}
	n := int64(len(queued))
	a := modelAnswer{remaining: m.capacity - n, resetUs: last - now}
	if cost > m.capacity {
		a.never = true
		return a
	}
	if n+cost > m.capacity {
		return a
	}
	a.allowed, a.remaining = true, m.capacity-n-cost
	if cost > 0 {
		a.delayUs, a.resetUs = last-now, last+cost*m.interval-now
	}
	if commit {
		for i := range cost {
			queued = append(queued, last+(i+1)*m.interval)
		}
		m.ends = queued
	}
	return a
}

// tokenBucketModel is Guava's SmoothBursty RateLimiter: stored permits
// (in µs of refill) resynchronised on access, reservations pushing the
// next free instant; a new bucket is full.
type tokenBucketModel struct {
	interval, maxStored int64 // µs per permit; µs of permits stored at most
	acquire             bool
	stored, nextFree    int64
	started             bool
}

func (m *tokenBucketModel) decide(nowMs, cost int64, commit bool) modelAnswer {
	now := nowMs * 1000
	stored, next := m.stored, m.nextFree
	if !m.started {
		stored, next = m.maxStored, now
	}
	if now > next { // resync
		stored = min(m.maxStored, stored+now-next)
		next = now
	}
	remaining := func() int64 {
		if next > now {
			return 0
		}
		return stored / m.interval
	}
	if !m.acquire && next > now { // tryAcquire: a wait is running
		return modelAnswer{resetUs: next - now + m.maxStored - stored}
	}
	if cost == 0 {
		return modelAnswer{allowed: true, remaining: remaining(), resetUs: next - now + m.maxStored - stored}
	}
	wait := next - now
	spend := min(cost*m.interval, stored)
	next += cost*m.interval - spend
	stored -= spend
	a := modelAnswer{allowed: true, remaining: remaining(), resetUs: next - now + m.maxStored - stored, delayUs: wait}
	if commit {
		m.stored, m.nextFree, m.started = stored, next, true
	}
	return a
}

// gcraModel is GCRA written as its equivalent, the continuous-state leaky
// bucket (meter): a level in µs that drains one µs per µs, each unit adds
// one interval, and a hit is admitted while the level stays within the
// tolerance (burst intervals).
type gcraModel struct {
	interval, burst int64
	level, at       int64
}

func (m *gcraModel) decide(nowMs, cost int64, commit bool) modelAnswer {
	now := nowMs * 1000
	tolerance := m.burst * m.interval
	level := max(0, m.level-(now-m.at))
	a := modelAnswer{remaining: (tolerance - level) / m.interval, resetUs: level}
	if cost > m.burst {
		a.never = true
		return a
	}
	if level+cost*m.interval > tolerance {
		return a
	}
	level += cost * m.interval
	a.allowed, a.remaining, a.resetUs = true, (tolerance-level)/m.interval, level
	if commit && cost > 0 {
		m.level, m.at = level, now
	}
	return a
}

// newModel is the model of a limiter spec.
func newModel(s counting.Spec) limiterModel {
	interval := s.PeriodMs * 1000 / s.Limit
	switch s.Kind {
	case counting.FixedWindow:
		return &fixedWindowModel{limit: s.Limit, period: s.PeriodMs, used: map[int64]int64{}}
	case counting.SlidingLog:
		return &slidingLogModel{limit: s.Limit, period: s.PeriodMs}
	case counting.SlidingWindow:
		return &slidingWindowModel{limit: s.Limit, period: s.PeriodMs, count: map[int64]int64{}}
	case counting.LeakyBucket:
		return &leakyBucketModel{interval: interval, capacity: burstOrLimit(s.Capacity, s.Limit)}
	case counting.TokenBucket:
		return &tokenBucketModel{interval: interval, maxStored: burstOrLimit(s.Burst, s.Limit) * interval, acquire: s.Acquire}
	case counting.GCRA:
		return &gcraModel{interval: interval, burst: burstOrLimit(s.Burst, s.Limit)}
	}
	panic("no model for " + s.Kind)
}

// allModel decides several limits all or nothing: admitted when each
// admits, and only then does each consume; a refused hit leaves every
// limit answering as a peek would.
type allModel []limiterModel

func (m allModel) decide(now, cost int64, commit bool) (bool, bool, []modelAnswer) {
	if cost == 0 {
		return m.peek(now)
	}
	as := make([]modelAnswer, len(m))
	all, never := true, false
	for i, l := range m {
		as[i] = l.decide(now, cost, false)
		all = all && as[i].allowed
		never = never || as[i].never
	}
	for i, l := range m {
		switch {
		case all && commit:
			l.decide(now, cost, true)
		case !all && as[i].allowed:
			as[i] = l.decide(now, 0, false)
		}
	}
	return all, never, as
}

// peek is what a hit of cost 1 would get, consuming nothing: each limit's
// decision and delay for that hit, its remaining and reset as they are
// now; when one limit would refuse it, the others answer as they are.
func (m allModel) peek(now int64) (bool, bool, []modelAnswer) {
	as, cur := make([]modelAnswer, len(m)), make([]modelAnswer, len(m))
	all := true
	for i, l := range m {
		cur[i] = l.decide(now, 0, false)
		hit := l.decide(now, 1, false)
		as[i] = modelAnswer{allowed: hit.allowed, never: hit.never, remaining: cur[i].remaining, resetUs: cur[i].resetUs, delayUs: hit.delayUs}
		all = all && hit.allowed
	}
	for i := range as {
		if !all && as[i].allowed {
			as[i] = cur[i]
		}
	}
	return all, false, as
}

// retryAfter is the first later millisecond at which the models admit the
// same hit, found by asking them at every one up to horizon; -1 if none.
func (m allModel) retryAfter(now, cost, horizon int64) int64 {
	for d := int64(1); d <= horizon; d++ {
		if ok, _, _ := m.decide(now+d, cost, false); ok {
			return d
		}
	}
	return -1
}

func ceilMs(us int64) int64 { return (us + 999) / 1000 }

var limiterKinds = []counting.Kind{counting.FixedWindow, counting.SlidingLog, counting.SlidingWindow, counting.LeakyBucket, counting.TokenBucket, counting.GCRA}

// randomLimit is a small limit of kind k, so that the stream reaches its
// edges often and retry-after scans stay short.
func randomLimit(rng *rand.Rand, k counting.Kind) counting.Spec {
	s := counting.Spec{Kind: k, Limit: 1 + rng.Int64N(8), PeriodMs: 30 + rng.Int64N(600)}
	switch k {
	case counting.TokenBucket:
		s.Burst = rng.Int64N(2 * s.Limit)
		s.Acquire = rng.IntN(3) == 0
	case counting.GCRA:
		s.Burst = rng.Int64N(2 * s.Limit)
	case counting.LeakyBucket:
		s.Capacity = rng.Int64N(2 * s.Limit)
	}
	return s
}

func randomCost(rng *rand.Rand, limit int64) int64 {
	switch p := rng.IntN(20); {
	case p < 2:
		return 0
	case p < 14:
		return 1
	case p < 19:
		return 1 + rng.Int64N(limit)
	default:
		return limit + 1 + rng.Int64N(2)
	}
}

// runLimiterStream drives the store and the models with the same random
// stream of hits on one key and compares every modelAnswer.
func runLimiterStream(t *testing.T, st *core.Store, clk *clock, rng *rand.Rand, key string, ss []counting.Spec, calls int) {
	t.Helper()
	m := make(allModel, len(ss))
	var horizon, minPeriod int64
	for i, s := range ss {
		m[i] = newModel(s)
		horizon, minPeriod = max(horizon, 4*s.PeriodMs+10), max(minPeriod, s.PeriodMs)
		if i == 0 || s.PeriodMs < minPeriod {
			minPeriod = s.PeriodMs
		}
	}
	it := counting.Item{Scope: counting.Scope{Policy: "model"}, Subject: counting.Subject{ID: key}, Spec: ss[0]}
	it.Spec.Also = ss[1:]
	for call := range calls {
		switch rng.IntN(12) {
		case 0:
			clk.Add(time.Duration(rng.Int64N(3*minPeriod)) * time.Millisecond)
		case 1, 2:
		default:
			clk.Add(time.Duration(rng.Int64N(minPeriod/3+1)) * time.Millisecond)
		}
		now := clk.Now().UnixMilli()
		it.Hits = randomCost(rng, ss[0].Limit)
		got := st.Write(context.Background(), []counting.Item{it})[0]
		if got.Code != 0 {
			t.Fatalf("call %d: %+v", call, got)
		}
		all, never, as := m.decide(now, it.Hits, true)
		want := counting.Result{Allowed: all}
		for i, a := range as {
			want.Remaining = min(want.Remaining, a.remaining)
			if i == 0 {
				want.Remaining = a.remaining
			}
			want.ResetAfterMs = max(want.ResetAfterMs, ceilMs(a.resetUs))
			if all {
				want.DelayMs = max(want.DelayMs, ceilMs(a.delayUs))
			}
		}
		want.Remaining = max(want.Remaining, 0)
		if !all {
			want.RetryAfterMs = m.retryAfter(now, it.Hits, horizon)
			if never != (want.RetryAfterMs == -1) {
				t.Fatalf("call %d: model says never=%v but retries at %d", call, never, want.RetryAfterMs)
			}
		}
		if got.Allowed != want.Allowed || got.Remaining != want.Remaining || got.RetryAfterMs != want.RetryAfterMs ||
			got.ResetAfterMs != want.ResetAfterMs || got.DelayMs != want.DelayMs {
			t.Fatalf("call %d at %d: cost %d on %+v:\n redis %+v\n model %+v %+v", call, now, it.Hits, ss, got, want, as)
		}
	}
}

func TestLimitersAgreeWithModels(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	rng := rand.New(rand.NewPCG(9, 4))
	for _, k := range limiterKinds {
		t.Run(string(k), func(t *testing.T) {
			for stream := range 12 {
				runLimiterStream(t, v.Store, clk, rng, fmt.Sprintf("%s-%d", k, stream), []counting.Spec{randomLimit(rng, k)}, 150)
			}
		})
	}
}

func TestSeveralLimitsDecideAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, _ := testStore(t, srv, clk)
	rng := rand.New(rand.NewPCG(5, 6))
	for stream := range 30 {
		n := 2 + rng.IntN(2)
		ss := make([]counting.Spec, n)
		for i := range ss {
			ss[i] = randomLimit(rng, limiterKinds[rng.IntN(len(limiterKinds))])
			ss[i].PeriodMs += int64(i) // never the same limit twice
		}
		runLimiterStream(t, v.Store, clk, rng, fmt.Sprintf("all-%d", stream), ss, 120)
	}
}

// burstOrLimit is a limiter's burst or capacity: the limit when not given.
func burstOrLimit(v, limit int64) int64 {
	if v > 0 {
		return v
	}
	return limit
}
