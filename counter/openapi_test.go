package main

import (
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/apispec"
	"github.com/freqcap/freqcap/shared/redistest"
)

// openapi/counter.yaml is valid and describes exactly the routes the
// counter serves (the Connect services are proto/'s).
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc, err := apispec.Load("../openapi/counter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.Start(t)
	st, s := testStore(t, srv, newClock(time.Now()))
	routes, err := apispec.Routes(NewServer(discardLogger(), s, st.Store, prometheus.NewRegistry()).(chi.Routes))
	if err != nil {
		t.Fatal(err)
	}
	missing, stale := apispec.Diff(routes, apispec.Operations(doc))
	for _, r := range missing {
		t.Errorf("openapi/counter.yaml lacks %s", r)
	}
	for _, o := range stale {
		t.Errorf("openapi/counter.yaml describes %s, which the counter does not serve", o)
	}
	if len(routes) < 12 {
		t.Fatalf("only %d routes walked: %v", len(routes), routes)
	}
}
