package main

import (
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/apispec"
	"github.com/freqcap/freqcap/shared/httpmetrics"
)

// openapi/callback.yaml is valid and describes exactly the routes of both
// listeners.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := apispec.Load("../openapi/callback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := loadSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	d := deps{log: slog.New(slog.NewTextHandler(io.Discard, nil)), settings: s, registry: reg, httpMetrics: httpmetrics.New(reg, "callback"),
		metrics: newMetrics(prometheus.NewRegistry(), nil), draining: &atomic.Bool{}}
	var routes []string
	for _, h := range []any{NewServer(d), NewAdminServer(d)} {
		rs, err := apispec.Routes(h.(chi.Routes))
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, rs...)
	}
	slices.Sort(routes)
	missing, stale := apispec.Diff(routes, apispec.Operations(doc))
	for _, r := range missing {
		t.Errorf("openapi/callback.yaml lacks %s", r)
	}
	for _, o := range stale {
		t.Errorf("openapi/callback.yaml describes %s, which callback does not serve", o)
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes walked: %v", len(routes), routes)
	}
}
