package main

import (
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
	problems, checked, err := rec.Unregistered("../dev/observability/grafana/dashboards/freqcap.json", "freqcap_callback_")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 8 {
		t.Fatalf("only %d counter metrics found in the dashboard", checked)
	}
	// And every metric of the alert rules (docs/operations.md).
	problems, alerted, err := rec.Unregistered("../dev/observability/alerts.yml", "freqcap_callback_")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if alerted < 3 {
		t.Fatalf("only %d counter metrics found in the alert rules", alerted)
	}
}
