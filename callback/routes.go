package main

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/freqcap/freqcap/shared/health"
)

// addPublicRoutes is the API exchanges see.
func addPublicRoutes(r chi.Router, d deps) {
	win := handleNotice(d, "win", false)
	billing := handleNotice(d, "billing", false)
	imp := handleNotice(d, "imp", true)
	click := handleNotice(d, "click", true)
	conv := handleNotice(d, "conv", true)
	loss := handleNotice(d, lossEvent, false)
	m := d.httpMetrics
	r.Method(http.MethodGet, "/win", m.Route("/win", win))
	r.Method(http.MethodPost, "/win", m.Route("/win", win))
	r.Method(http.MethodGet, "/billing", m.Route("/billing", billing))
	r.Method(http.MethodPost, "/billing", m.Route("/billing", billing))
	r.Method(http.MethodGet, "/imp", m.Route("/imp", imp))
	// Suppression events: a click (the click tracker; a signed "to" is
	// where it sends the browser) and a conversion (a pixel on the
	// advertiser's page, or a server-to-server POST).
	r.Method(http.MethodGet, "/click", m.Route("/click", click))
	r.Method(http.MethodGet, "/conv", m.Route("/conv", conv))
	r.Method(http.MethodPost, "/conv", m.Route("/conv", conv))
	// A loss (OpenRTB lurl) ends the bid's reservation (POST /v1/reserve)
	// before its TTL; nothing is counted.
	r.Method(http.MethodGet, "/loss", m.Route("/loss", loss))
	r.Method(http.MethodPost, "/loss", m.Route("/loss", loss))
}

// addAdminRoutes is the internal API: never expose it to exchanges.
func addAdminRoutes(r chi.Router, d deps) {
	m := d.httpMetrics
	r.Method(http.MethodGet, "/v1/campaigns", m.Route("/v1/campaigns", handleCampaignList(d.log, d.campaigns)))
	r.Method(http.MethodGet, "/v1/campaigns/{cid}/counts", m.Route("/v1/campaigns/{cid}/counts",
		handleCampaignCounts(d.log, d.campaigns, d.schema, d.settings.Counter, d.settings.CounterToken)))
	r.Method(http.MethodGet, "/v1/campaigns/{cid}", m.Route("/v1/campaigns/{cid}", handleCampaignGet(d.log, d.campaigns)))
	r.Method(http.MethodPut, "/v1/campaigns/{cid}", m.Route("/v1/campaigns/{cid}", handleCampaignPut(d.log, d.campaigns)))
	r.Method(http.MethodDelete, "/v1/campaigns/{cid}", m.Route("/v1/campaigns/{cid}", handleCampaignDelete(d.log, d.campaigns)))
	r.Method(http.MethodGet, "/v1/deadletters", m.Route("/v1/deadletters", handleDeadLetters(d.log, d.journal)))
	r.Method(http.MethodPost, "/v1/deadletters/replay", m.Route("/v1/deadletters/replay", handleDeadLetterReplay(d.log, d.journal)))
	r.Method(http.MethodDelete, "/v1/deadletters/{id}", m.Route("/v1/deadletters/{id}", handleDeadLetterDelete(d.log, d.journal)))
	r.Method(http.MethodGet, "/healthz", m.Route("/healthz", health.Live()))
	r.Method(http.MethodGet, "/readyz", m.Route("/readyz", health.Ready(d.log, "redis", d.ping)))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	r.Mount("/debug", middleware.Profiler())
}
