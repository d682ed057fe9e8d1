package main

import (
	"log/slog"
	"net/http"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/freqcontrol"
	"github.com/freqcap/freqcap/ratelimit"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/httpmetrics"
)

// deps is what the handlers need, built once by NewServer.
type deps struct {
	log         *slog.Logger
	settings    Settings
	parser      *campaign.Parser
	store       *core.Store
	campaigns   campaign.Counters
	limits      *core.Limits
	freqControl *freqControl
	limiter     *ratelimit.Checker
	views       *views
	caps        *capsService
	degrader    *degrader
	gatherer    prometheus.Gatherer
	httpMetrics *httpmetrics.Metrics
}

// NewServer builds the counter's HTTP handler: router, middleware, routes.
func NewServer(log *slog.Logger, s Settings, store *core.Store, m *metrics, reg *prometheus.Registry) http.Handler {
	lim := s.limits()
	d := deps{
		log:         log,
		settings:    s,
		parser:      campaign.NewParser(s.limits()),
		store:       store,
		campaigns:   campaign.Counters{Store: store, M: m},
		limits:      lim,
		freqControl: &freqControl{svc: freqcontrol.New(log, store, s.WriteTimeout), maxBatch: s.MaxBatch, maxReadBatch: s.MaxReadBatch},
		degrader:    &degrader{log: log, metrics: m},
		limiter:     &ratelimit.Checker{Log: log, Store: store, Policies: s.Policies, Timeout: s.ReadTimeout, Observe: m.limitCheck},
		views:       &views{log: log, store: store, pol: s.Views, perArticle: s.PerArticle, writeTimeout: s.WriteTimeout, readTimeout: s.ReadTimeout},
		gatherer:    reg,
		httpMetrics: httpmetrics.New(reg, "counter"),
	}
	d.caps = &capsService{parser: d.parser, campaigns: d.campaigns, maxItems: s.MaxReadBatch, readTimeout: s.ReadTimeout, reserveTTL: s.ReserveTTL, m: m}
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	// With COUNTER_AUTH_TOKENS, every route but the health checks takes a
	// bearer token.
	r.Use(func(next http.Handler) http.Handler {
		return auth.Bearer(s.Tokens, func(path string) bool { return path == "/healthz" || path == "/readyz" }, next)
	})
	addRoutes(r, d)
	return r
}

// NewOpsServer builds the ops listener's handler: metrics, pprof, health.
func NewOpsServer(log *slog.Logger, s Settings, store *core.Store, reg *prometheus.Registry) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	addOpsRoutes(r, deps{log: log, settings: s, store: store, gatherer: reg})
	return r
}
