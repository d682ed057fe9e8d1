// Package httpmetrics counts and times HTTP requests per route.
package httpmetrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds freqcap_http_requests_total{service,route,code},
// freqcap_http_request_duration_seconds{service,route} and
// freqcap_http_requests_in_flight{service,route}.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// New registers the request metrics of one service on reg.
func New(reg prometheus.Registerer, service string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "freqcap_http_requests_total",
			Help:        "HTTP requests served, by route and status code.",
			ConstLabels: prometheus.Labels{"service": service},
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "freqcap_http_request_duration_seconds",
			Help:        "HTTP request latency, by route.",
			ConstLabels: prometheus.Labels{"service": service},
			Buckets:     []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name:        "freqcap_http_requests_in_flight",
			Help:        "HTTP requests being served, by route.",
			ConstLabels: prometheus.Labels{"service": service},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

// Route instruments the handler of one route. The route's series are
// looked up once, not on every request: this sits on the bidder's path.
func (m *Metrics) Route(route string, next http.Handler) http.Handler {
	duration, inFlight := m.duration.WithLabelValues(route), m.inFlight.WithLabelValues(route)
	var codes sync.Map // status code -> prometheus.Counter
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Inc()
		defer inFlight.Dec()
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		c, ok := codes.Load(code)
		if !ok {
			c, _ = codes.LoadOrStore(code, m.requests.WithLabelValues(route, strconv.Itoa(code)))
		}
		c.(prometheus.Counter).Inc()
		duration.Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status code a handler sent.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
