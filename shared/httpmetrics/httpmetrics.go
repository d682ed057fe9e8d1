// Package httpmetrics counts and times HTTP requests per chi route pattern.
package httpmetrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// Middleware records freqcap_http_requests_total{service,route,code} and
// freqcap_http_request_duration_seconds{service,route}.
type Middleware struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// New registers the request metrics of one service on reg.
func New(reg prometheus.Registerer, service string) *Middleware {
	m := &Middleware{
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
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// Handler wraps next; it must run inside a chi router so the route pattern
// is known once next returns.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		next.ServeHTTP(ww, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := ww.Status()
		if status == 0 {
			status = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	})
}
