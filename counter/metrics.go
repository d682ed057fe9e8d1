package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// metrics are the counter's own series; HTTP request metrics come from
// shared/httpmetrics.
type metrics struct {
	degradedReads *prometheus.CounterVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	redisErrors   *prometheus.CounterVec
	duplicates    prometheus.Counter
	limitChecks   *prometheus.CounterVec
	staleReads    prometheus.Counter
	verdicts      *prometheus.CounterVec
	bases         *prometheus.CounterVec
	reservations  *prometheus.CounterVec
}

// RedisError, Duplicate, Cache and StaleReads are what the core store
// observes (core.Metrics).
func (m *metrics) RedisError(op string) { m.redisErrors.WithLabelValues(op).Inc() }
func (m *metrics) Duplicate()           { m.duplicates.Inc() }
func (m *metrics) StaleReads(n int)     { m.staleReads.Add(float64(n)) }
func (m *metrics) Cache(hits, misses int) {
	m.cacheHits.Add(float64(hits))
	m.cacheMisses.Add(float64(misses))
}

// decided counts a decide's verdicts: a blocked one by the level and the
// window unit of the cap that blocked it. The verdicts are tallied first
// and each label set added once: a decide's 50 share a few, and a labelled
// counter's lookup hashes its labels.
func (m *metrics) decided(vs []counting.Verdict) {
	type tally struct {
		labels [3]string // result, level, window
		n      int
	}
	var buf [8]tally
	verdicts := buf[:0]
	var bases [len(verdictBases)]int
	for i := range vs {
		v := &vs[i]
		result, level, window := "allowed", "none", "none"
		switch {
		case v.Degraded:
			result = "degraded"
		case v.Code == apierr.KeyNotFound:
			result = "unknown"
		case !v.Allowed && v.Cap != nil:
			result, level, window = "blocked", v.Cap.Level, v.Cap.Window.Unit
		case !v.Allowed:
			result, window = "blocked", v.Reason // no_identity
		}
		k, j := [3]string{result, level, window}, 0
		for j < len(verdicts) && verdicts[j].labels != k {
			j++
		}
		if j == len(verdicts) {
			verdicts = append(verdicts, tally{labels: k})
		}
		verdicts[j].n++
		basis := basisFresh
		switch {
		case v.Degraded:
			basis = basisDegraded
		case v.Stale:
			basis = basisStale
		case v.Reserved > 0:
			basis = basisReserved
		}
		bases[basis]++
	}
	for _, t := range verdicts {
		m.verdicts.WithLabelValues(t.labels[:]...).Add(float64(t.n))
	}
	for b, n := range bases {
		if n > 0 {
			m.bases.WithLabelValues(verdictBases[b]).Add(float64(n))
		}
	}
}

// verdictBases are what a verdict was decided on (the label basis), by
// their index in decided's tally.
var verdictBases = [...]string{basisFresh: "fresh", basisStale: "stale", basisReserved: "reserved", basisDegraded: "degraded"}

const (
	basisFresh = iota
	basisStale
	basisReserved
	basisDegraded
)

// reserved counts a reservation's answers: held (on how many counters) or
// failed.
func (m *metrics) reserved(as []counting.ReserveAnswer) {
	for _, a := range as {
		switch {
		case a.Code != 0:
			m.reservations.WithLabelValues("failed").Inc()
		case a.Counters == 0:
			m.reservations.WithLabelValues("nothing_capped").Inc()
		default:
			m.reservations.WithLabelValues("held").Inc()
		}
	}
}

// limitCheck counts one rate-limit check's outcome.
func (m *metrics) limitCheck(policy, outcome string) {
	m.limitChecks.WithLabelValues(policy, outcome).Inc()
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		degradedReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_degraded_reads_total",
			Help: "Read items answered with zero counts because Redis failed or was too slow, by code (10001 timeout, 10004 unavailable).",
		}, []string{"code"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_counter_cache_hits_total",
			Help: "Reads of cached dimensions served from the client-side cache.",
		}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_counter_cache_misses_total",
			Help: "Reads of cached dimensions that went to Redis.",
		}),
		redisErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_redis_errors_total",
			Help: "Redis commands that failed or timed out, by operation.",
		}, []string{"op"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_counter_duplicate_events_total",
			Help: "Increments skipped because their event id was already counted.",
		}),
		limitChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_limit_checks_total",
			Help: "Rate-limit checks by policy (inline for inline rules) and outcome: allowed, refused, shadowed (shadow mode admitted what enforcing would refuse), degraded (Redis failed, admitted), peeked (cost 0: answered, nothing taken).",
		}, []string{"policy", "outcome"}),
		staleReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_counter_stale_reads_total",
			Help: "Items of reads Redis could not serve in time, answered with their last-known value (younger than COUNTER_STALE_MAX).",
		}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_decide_verdicts_total",
			Help: "Candidates of /v1/decide and Caps/Decide by result (allowed, blocked, degraded: allowed with counts unread, unknown: nothing declared) and, when blocked, the level and the window unit of the blocking cap.",
		}, []string{"result", "level", "window"}),
		bases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_decide_bases_total",
			Help: "Decide verdicts by what their counts were: fresh, stale (last-known values: over-delivery possible by what was counted since), degraded (unread: allowed uncapped) or reserved (in-flight bids added).",
		}, []string{"basis"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_counter_reservations_total",
			Help: "Candidates of /v1/reserve: held (on the counters their caps read), nothing_capped (a campaign without caps on these identities) or failed (Redis).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.degradedReads, m.cacheHits, m.cacheMisses, m.redisErrors, m.duplicates, m.limitChecks, m.staleReads, m.verdicts,
		m.bases, m.reservations)
	return m
}

// redisMemory reports Redis's memory against its maxmemory at each scrape
// (INFO memory, 1 s at most): with noeviction, writes fail once the limit
// is reached, so an alert on the ratio comes first.
type redisMemory struct{ rdb rueidis.Client }

var (
	redisUsedDesc = prometheus.NewDesc("freqcap_counter_redis_memory_used_bytes", "Redis used_memory (INFO memory), read at scrape.", nil, nil)
	redisMaxDesc  = prometheus.NewDesc("freqcap_counter_redis_memory_max_bytes", "Redis maxmemory (0: no limit), read at scrape.", nil, nil)
)

func (c *redisMemory) Describe(ch chan<- *prometheus.Desc) {
	ch <- redisUsedDesc
	ch <- redisMaxDesc
}

func (c *redisMemory) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := c.rdb.Do(ctx, c.rdb.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return // no sample: the scrape shows Redis unreachable through redis_errors and readyz
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "used_memory":
			ch <- prometheus.MustNewConstMetric(redisUsedDesc, prometheus.GaugeValue, n)
		case "maxmemory":
			ch <- prometheus.MustNewConstMetric(redisMaxDesc, prometheus.GaugeValue, n)
		}
	}
}
