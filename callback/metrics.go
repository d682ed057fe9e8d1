package main

import "github.com/prometheus/client_golang/prometheus"

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
}

func newMetrics(reg prometheus.Registerer, queueDepth func() float64) *metrics {
	m := &metrics{
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_received_total", Help: "Notices received from exchanges, by event.",
		}, []string{"event"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_accepted_total", Help: "Notices validated and queued (answered 2xx), by event.",
		}, []string{"event"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_notices_rejected_total", Help: "Notices refused, by event and reason (invalid, macro, audit, queue_full, draining).",
		}, []string{"event", "reason"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_forwarded_total", Help: "Notices delivered to the counter, by result (counted, duplicate).",
		}, []string{"result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "freqcap_callback_dropped_total", Help: "Accepted notices that were not counted, by reason (counter_rejected, retries_exhausted, shutdown).",
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
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "freqcap_callback_queue_depth", Help: "Notices waiting to be forwarded.",
	}, queueDepth)
	reg.MustRegister(m.received, m.accepted, m.rejected, m.forwarded, m.dropped, m.retries, m.forwardDuration, m.unknownCampaigns, depth)
	return m
}
