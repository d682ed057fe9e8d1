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
	problems, err := apispec.Check("../openapi/callback.yaml", routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(routes) < 10 {
		t.Fatalf("only %d routes walked: %v", len(routes), routes)
	}
}
