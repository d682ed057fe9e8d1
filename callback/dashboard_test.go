package main

import (
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
	problems, checked, err := rec.Unregistered("../dev/observability/grafana/dashboards/freqcap.json", "freqcap_counter_")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 10 {
		t.Fatalf("only %d callback metrics found in the dashboard", checked)
	}
	// And every metric of the alert rules (docs/operations.md).
	problems, alerted, err := rec.Unregistered("../dev/observability/alerts.yml", "freqcap_counter_")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if alerted < 3 {
		t.Fatalf("only %d callback metrics found in the alert rules", alerted)
	}
}
