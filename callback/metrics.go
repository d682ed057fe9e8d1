package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/signing"
)

// metrics are callback's own series; HTTP request metrics come from
// shared/httpmetrics.
type metrics struct {
	received         *prometheus.CounterVec
	accepted         *prometheus.CounterVec
	rejected         *prometheus.CounterVec
	forwarded        *prometheus.CounterVec
	dropped          *prometheus.CounterVec
	retries          prometheus.Counter
	forwardDuration  prometheus.Histogram
	unknownCampaigns prometheus.Counter
	claimed          prometheus.Counter
	released         prometheus.Counter
	sigFailures      *prometheus.CounterVec
	batchRefused     *prometheus.CounterVec
	duplicates       *prometheus.CounterVec
	deadLettered     prometheus.Counter
	droppedDims      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, journal *Journal) *metrics {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_received_total", Help: "Notices received from exchanges, by event.",
		}, []string{"event"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_accepted_total", Help: "Notices validated and taken (answered 2xx), by event: written to the journal, or with nothing to write (the loss of a bid its URL says was not reserved).",
		}, []string{"event"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_rejected_total", Help: "Notices refused, by event and reason (invalid, macro, audit, conflict, too_large, signature, unknown_campaign, source_limit, journal_full, journal_unavailable, journal_unreplicated, draining).",
		}, []string{"event", "reason"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_forwarded_total", Help: "Notices delivered to the counter, by result (counted, duplicate).",
		}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_dropped_total", Help: "Accepted notices that will never be counted, by reason (counter_rejected; malformed; invalid, macro, audit for notices taken before the counter schema was known).",
		}, []string{"reason"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_callback_forward_retries_total", Help: "Forwarding attempts that failed and were retried.",
		}),
		forwardDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "freqcap_callback_forward_duration_seconds", Help: "Time from accepting a notice to the counter's answer, retries included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1, 5, 30, 300},
		}),
		unknownCampaigns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_callback_unknown_campaigns_total", Help: "Notices for campaigns not in Redis, counted with the day counter only.",
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_callback_journal_claimed_total", Help: "Journal entries taken over after they were left idle (by a crashed instance, or after RetryFor).",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_callback_journal_released_total", Help: "Notices still undelivered after CALLBACK_RETRY_FOR, left in the journal for the next claim.",
		}),
		sigFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_signature_failures_total", Help: "Notices refused for their signature, by reason (missing, malformed, unknown_kid, bad_sig, expired, exp_too_far, v1_refused).",
		}, []string{"reason"}),
		deadLettered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "freqcap_callback_dead_lettered_total", Help: "Notices moved to the dead-letter stream notices:{dead}: the counter could not write them and a retry would not (Redis refused their keys), so their partition goes on. Replay them on the admin API once mended.",
		}),
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_duplicate_total", Help: "Signed notices sent again while their URL was valid (an exchange's retry, or a replay): answered as the first time, not counted again, by event.",
		}, []string{"event"}),
		batchRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_forward_refused_total", Help: "Counter requests refused as a whole (a configuration or transport problem: credentials, batch size, address), by HTTP status; their notices are sent again, never dropped. Alert on any.",
		}, []string{"status"}),
		droppedDims: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_dropped_dimensions_total", Help: "Dimensions of accepted notices left out because the counter no longer counts them, by dimension; the notice's other dimensions are counted.",
		}, []string{"dim"}),
	}
	for _, reason := range []string{signing.Missing, signing.Malformed, signing.UnknownKid, signing.BadSig, signing.Expired, signing.TooFar, signing.Version1} {
		m.sigFailures.WithLabelValues(reason)
	}
	reg.MustRegister(m.received, m.accepted, m.rejected, m.forwarded, m.dropped, m.retries, m.forwardDuration, m.unknownCampaigns,
		m.claimed, m.released, m.sigFailures, m.batchRefused, m.droppedDims, m.duplicates, m.deadLettered, &journalCollector{j: journal})
	return m
}

// journalCollector reads the journal's state from Redis when /metrics is
// scraped.
type journalCollector struct{ j *Journal }

var (
	journalUndelivered = prometheus.NewDesc("freqcap_callback_journal_undelivered",
		"Accepted notices in the journal, not yet delivered to the counter (all instances).", nil, nil)
	journalPending = prometheus.NewDesc("freqcap_callback_journal_pending",
		"Notices read from the journal by an instance and not yet acknowledged (all instances).", nil, nil)
	journalLag = prometheus.NewDesc("freqcap_callback_journal_lag_seconds",
		"Age of the oldest undelivered notice.", nil, nil)
	journalDead = prometheus.NewDesc("freqcap_callback_journal_dead_letters",
		"Notices in the dead-letter stream notices:{dead}, waiting for an operator (alert on any).", nil, nil)
	journalUp = prometheus.NewDesc("freqcap_callback_journal_up",
		"1 when the journal's state could be read for this scrape.", nil, nil)
)

func (c *journalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- journalUndelivered
	ch <- journalPending
	ch <- journalLag
	ch <- journalDead
	ch <- journalUp
}

func (c *journalCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	st, err := c.j.Stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(journalUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(journalUp, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(journalUndelivered, prometheus.GaugeValue, float64(st.undelivered))
	ch <- prometheus.MustNewConstMetric(journalPending, prometheus.GaugeValue, float64(st.pending))
	ch <- prometheus.MustNewConstMetric(journalLag, prometheus.GaugeValue, st.lag.Seconds())
	ch <- prometheus.MustNewConstMetric(journalDead, prometheus.GaugeValue, float64(st.dead))
}
