// Package observability holds the Prometheus and Grafana configuration of
// compose's "observability" profile; its test is make dashboard-check.
package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type panel struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// promtool runs Prometheus's own checker (Debian: apt-get install prometheus).
func promtool(t *testing.T, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not found: apt-get install --no-install-recommends prometheus")
	}
	if out, err := exec.Command("promtool", args...).CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func TestPrometheusConfigIsValid(t *testing.T) {
	promtool(t, "check", "config", "prometheus.yml")
}

// The alert rules docs/operations.md lists are valid (their metrics are
// checked against the services' in the services' dashboard tests).
func TestAlertRulesAreValid(t *testing.T) {
	promtool(t, "check", "rules", "alerts.yml")
}

// The dashboard is well formed: every panel on the provisioned data
// source, inside the 24-column grid, not over another, and every query
// valid PromQL (checked by promtool as recording rules).
func TestDashboardIsValid(t *testing.T) {
	b, err := os.ReadFile("grafana/dashboards/freqcap.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string  `json:"uid"`
		Title  string  `json:"title"`
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	ds, err := os.ReadFile("grafana/provisioning/datasources/prometheus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	taken := map[[2]int]string{}
	queries := 0
	for _, p := range d.Panels {
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the grid", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok {
					t.Fatalf("panels %q and %q overlap", other, p.Title)
				}
				taken[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %+v has no title or no query", p)
		}
		if !strings.Contains(string(ds), "uid: "+p.Datasource.UID+"\n") {
			t.Errorf("panel %q uses data source %q, which is not provisioned", p.Title, p.Datasource.UID)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if refs[q.RefID] || q.Expr == "" {
				t.Errorf("panel %q: refId %q repeated or query empty", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			queries++
			expr, _ := json.Marshal(q.Expr)
			fmt.Fprintf(&rules, "      - record: dashboard:q%d\n        expr: %s\n", queries, expr)
		}
	}
	if queries < 10 {
		t.Fatalf("only %d queries", queries)
	}
	file := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", file)
}
