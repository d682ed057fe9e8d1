// Package promcheck lets tests hold the dashboard to the metrics the
// services really register: a Registerer that records every metric name
// it is given, and the metric names a Grafana dashboard's queries and a
// Prometheus rules file's expressions use.
package promcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"
)

// Recorder is a Registerer that remembers the names of what it registers.
type Recorder struct {
	prometheus.Registerer
	names []string
}

// NewRecorder registers into a fresh registry and records the names.
func NewRecorder() *Recorder { return &Recorder{Registerer: prometheus.NewRegistry()} }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Register records c's metric names, then registers it.
func (r *Recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names = append(r.names, m[1])
		}
	}
	return r.Registerer.Register(c)
}

// MustRegister is Register that panics, as prometheus's does.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Names is every metric name registered so far.
func (r *Recorder) Names() []string { return slices.Clone(r.names) }

// dashboard is the part of a Grafana dashboard that holds queries.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`\bfreqcap_[a-z0-9_]+`)

// DashboardMetrics returns, for every freqcap metric a dashboard's queries
// use, the title of a panel using it; a histogram's _bucket, _sum and
// _count series are reported under the histogram's name.
func DashboardMetrics(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			for _, n := range metricName.FindAllString(t.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					n = strings.TrimSuffix(n, suffix)
				}
				out[n] = p.Title
			}
		}
	}
	return out, nil
}

// RulesMetrics returns, for every freqcap metric the expressions of a
// Prometheus rules file use, the name of a rule using it.
func RulesMetrics(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, n := range metricName.FindAllString(r.Expr, -1) {
				out[n] = r.Alert + r.Record
			}
		}
	}
	return out, nil
}

// Unregistered checks a dashboard's metrics against what r registered:
// those of the dashboard with none of the prefixes in others (the other
// services' metrics) must be among r's names. It returns what is not, and
// how many it checked.
// A path ending in .yml is a Prometheus rules file (RulesMetrics).
func (r *Recorder) Unregistered(dashboardPath string, others ...string) (problems []string, checked int, err error) {
	read := DashboardMetrics
	if strings.HasSuffix(dashboardPath, ".yml") {
		read = RulesMetrics
	}
	used, err := read(dashboardPath)
	if err != nil {
		return nil, 0, err
	}
	for name, panel := range used {
		if slices.ContainsFunc(others, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		checked++
		if !slices.Contains(r.names, name) {
			problems = append(problems, fmt.Sprintf("%s: %q uses %s, which is not registered", dashboardPath, panel, name))
		}
	}
	return problems, checked, nil
}
