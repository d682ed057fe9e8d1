package main

import (
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/freqcap/freqcap/shared/health"
)

// addPublicRoutes is the API exchanges see.
func addPublicRoutes(r chi.Router, d deps) {
	win := handleNotice("win", d.settings.Dimensions, d.forwarder, d.metrics, d.draining, d.log, false)
	billing := handleNotice("billing", d.settings.Dimensions, d.forwarder, d.metrics, d.draining, d.log, false)
	imp := handleNotice("imp", d.settings.Dimensions, d.forwarder, d.metrics, d.draining, d.log, true)
	r.Get("/win", win.ServeHTTP)
	r.Post("/win", win.ServeHTTP)
	r.Get("/billing", billing.ServeHTTP)
	r.Post("/billing", billing.ServeHTTP)
	r.Get("/imp", imp.ServeHTTP)
}

// addAdminRoutes is the internal API: never expose it to exchanges.
func addAdminRoutes(r chi.Router, d deps) {
	r.Get("/v1/campaigns/{cid}", handleCampaignGet(d.log, d.campaigns).ServeHTTP)
	r.Put("/v1/campaigns/{cid}", handleCampaignPut(d.log, d.campaigns).ServeHTTP)
	r.Delete("/v1/campaigns/{cid}", handleCampaignDelete(d.log, d.campaigns).ServeHTTP)
	r.Get("/healthz", health.Live().ServeHTTP)
	r.Get("/readyz", health.Ready(d.log, "redis", d.campaigns.Ping).ServeHTTP)
	r.Handle("/metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	r.Mount("/debug", middleware.Profiler())
}
