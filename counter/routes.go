package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/freqcap/freqcap/shared/health"
)

// addRoutes is the counter's whole HTTP API.
func addRoutes(r chi.Router, d deps) {
	r.Post("/v1/incr", handleIncr(d.log, d.parser, d.store, d.settings.WriteTimeout).ServeHTTP)
	r.Get("/v1/freq", handleFreq(d.log, d.parser, d.store, d.degrader).ServeHTTP)
	r.Post("/v1/pace", handlePace(d.log, d.parser, d.store, d.settings.WriteTimeout).ServeHTTP)
	r.Post("/v1/freq/batch", handleFreqBatch(d.log, d.parser, d.store, d.degrader, d.settings.MaxBatch).ServeHTTP)
	r.Get("/healthz", health.Live().ServeHTTP)
	r.Get("/readyz", health.Ready(d.log, "redis", d.store.Ping).ServeHTTP)
	r.Mount("/debug", middleware.Profiler())
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.gatherer, promhttp.HandlerOpts{}))
}
