package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/buildinfo"
	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/promcheck"
)

// Every callback metric the dashboard plots is one callback registers.
func TestDashboardPlotsOnlyMetricsCallbackExports(t *testing.T) {
	rec := promcheck.NewRecorder()
	newMetrics(rec, nil)
	httpmetrics.New(rec, "callback")
	buildinfo.Register(rec, "callback")
	used, err := promcheck.DashboardMetrics("../dev/observability/grafana/dashboards/freqcap.json")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for name, panel := range used {
		if strings.HasPrefix(name, "freqcap_counter_") {
			continue
		}
		checked++
		if !slices.Contains(rec.Names(), name) {
			t.Errorf("panel %q plots %s, which callback does not export", panel, name)
		}
	}
	if checked < 10 {
		t.Fatalf("only %d callback metrics found in the dashboard", checked)
	}
}
