package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/buildinfo"
	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/promcheck"
)

// Every counter metric the dashboard plots is one the counter registers.
func TestDashboardPlotsOnlyMetricsTheCounterExports(t *testing.T) {
	rec := promcheck.NewRecorder()
	newMetrics(rec)
	httpmetrics.New(rec, "counter")
	buildinfo.Register(rec, "counter")
	rec.MustRegister(&redisMemory{})
	used, err := promcheck.DashboardMetrics("../dev/observability/grafana/dashboards/freqcap.json")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, panel := range used {
		if strings.HasPrefix(name, "freqcap_callback_") {
			continue
		}
		checked++
		if !slices.Contains(rec.Names(), name) {
			t.Errorf("panel %q plots %s, which the counter does not export", panel, name)
		}
	}
	if checked < 8 {
		t.Fatalf("only %d counter metrics found in the dashboard", checked)
	}
}
