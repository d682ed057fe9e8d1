package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/signing"
)

// deps is what the handlers need.
type deps struct {
	log       *slog.Logger
	settings  Settings
	campaigns *Campaigns
	journal   *Journal
	schema    *Schema
	metrics   *metrics
	draining  *atomic.Bool
	// verifier checks notice signatures; nil when notices are unsigned.
	verifier *signing.Verifier
	registry *prometheus.Registry
	// httpMetrics times requests of both listeners; their routes differ.
	httpMetrics *httpmetrics.Metrics
}

// ping reports whether the campaigns' Redis and the journal's (when it has
// its own, CALLBACK_JOURNAL_REDIS_URL) answer.
func (d deps) ping(ctx context.Context) error {
	if err := d.campaigns.Ping(ctx); err != nil {
		return err
	}
	if d.settings.JournalRedisURL == "" {
		return nil
	}
	if err := d.journal.Ping(ctx); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

func newRouter(m *httpmetrics.Metrics) chi.Router {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.NotFound(m.Route("unmatched", http.HandlerFunc(httpjson.NotFound)).ServeHTTP)
	r.MethodNotAllowed(m.Route("unmatched", http.HandlerFunc(httpjson.MethodNotAllowed)).ServeHTTP)
	return r
}

// NewServer builds the public handler that faces ad exchanges.
func NewServer(d deps) http.Handler {
	r := newRouter(d.httpMetrics)
	addPublicRoutes(r, d)
	return r
}

// NewAdminServer builds the internal handler: campaigns, health, metrics,
// pprof. With CALLBACK_ADMIN_TOKENS, the campaign API (/v1/...) takes a
// bearer token; health, metrics and pprof stay on this loopback listener
// without one.
func NewAdminServer(d deps) http.Handler {
	r := newRouter(d.httpMetrics)
	r.Use(func(next http.Handler) http.Handler {
		return auth.Bearer(d.settings.AdminTokens, func(path string) bool { return !strings.HasPrefix(path, "/v1/") }, next)
	})
	addAdminRoutes(r, d)
	return r
}
