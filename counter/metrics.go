package main

import "github.com/prometheus/client_golang/prometheus"

// metrics are the counter's own series; HTTP request metrics come from
// shared/httpmetrics.
type metrics struct {
	degradedReads *prometheus.CounterVec
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	redisErrors   *prometheus.CounterVec
	duplicates    prometheus.Counter
	limitChecks   *prometheus.CounterVec
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
			Help: "Rate-limit checks by policy (inline for inline rules) and outcome: allowed, refused, shadowed (shadow mode admitted what enforcing would refuse), degraded (Redis failed, admitted).",
		}, []string{"policy", "outcome"}),
	}
	reg.MustRegister(m.degradedReads, m.cacheHits, m.cacheMisses, m.redisErrors, m.duplicates, m.limitChecks)
	return m
}
