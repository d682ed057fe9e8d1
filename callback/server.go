package main

import (
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/httpmetrics"
)

// deps is what the handlers need.
type deps struct {
	log       *slog.Logger
	settings  Settings
	campaigns *Campaigns
	forwarder *Forwarder
	metrics   *metrics
	draining  *atomic.Bool
	registry  *prometheus.Registry
}

func newRouter(reg prometheus.Registerer, listener string) chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(httpmetrics.New(prometheus.WrapRegistererWith(prometheus.Labels{"listener": listener}, reg), "callback").Handler)
	r.NotFound(httpjson.NotFound)
	r.MethodNotAllowed(httpjson.MethodNotAllowed)
	return r
}

// NewServer builds the public handler that faces ad exchanges.
func NewServer(d deps) http.Handler {
	r := newRouter(d.registry, "public")
	addPublicRoutes(r, d)
	return r
}

// NewAdminServer builds the internal handler: campaigns, health, metrics, pprof.
func NewAdminServer(d deps) http.Handler {
	r := newRouter(d.registry, "admin")
	addAdminRoutes(r, d)
	return r
}
