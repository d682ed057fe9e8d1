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
	srv := redistest.Start(t)
	st, s := testStore(t, srv, newClock(time.Now()))
	routes, err := apispec.Routes(NewServer(discardLogger(), s, st.Store, st.m, prometheus.NewRegistry()).(chi.Routes))
	if err != nil {
		t.Fatal(err)
	}
	problems, err := apispec.Check("../openapi/counter.yaml", routes)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(routes) < 12 {
		t.Fatalf("only %d routes walked: %v", len(routes), routes)
	}
}
