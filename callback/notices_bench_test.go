package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/redistest"
)

// BenchmarkWinHandler is what callback does for an unsigned win between
// reading its request and writing its answer: the router, the metrics,
// the notice's parameters, its validation and its append to the journal
// (format 2) of a real Redis, without the network.
func BenchmarkWinHandler(b *testing.B) {
	srv := redistest.StartSingle(b)
	j, _ := newTestJournalOn(b, srv, 8, 1<<30)
	j.packed = true
	s, err := loadSettings(nil)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	sch := &Schema{}
	sch.cur.Store(testSchema) // as the counter told it
	h := NewServer(deps{log: slog.New(slog.NewTextHandler(io.Discard, nil)), settings: s, journal: j, schema: sch,
		registry: reg, httpMetrics: httpmetrics.New(reg, "callback"), metrics: newMetrics(prometheus.NewRegistry(), nil),
		draining: &atomic.Bool{}})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r := httptest.NewRequest(http.MethodGet, "/win?cid=42&device=6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f&tagid=1234&eid=auction-"+strconv.Itoa(i)+"&price=0.42", nil)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNoContent {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
