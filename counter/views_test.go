package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/redistest"
)

func TestViewCountsOnlyWithinTheViewersLimits(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	v, s := testStore(t, srv, clk, "COUNTER_VIEWS_PER_ARTICLE=sliding_log:1/10m", "COUNTER_VIEWS_PER_VIEWER=sliding_window:3/1h")
	vs := &views{log: discardLogger(), store: v.Store, pol: s.Views, perArticle: s.PerArticle}
	view := func(article, viewer string, counted bool, total int64) {
		t.Helper()
		a, err := vs.count(context.Background(), article, viewer)
		if err != nil {
			t.Fatal(err)
		}
		if a.Counted != counted || a.Total != total || len(a.Limits) != 2 {
			t.Fatalf("%s viewed by %s: %+v, want counted %v, total %d", article, viewer, a, counted, total)
		}
	}
	view("a1", "u1", true, 1)
	view("a1", "u1", false, 1) // the same viewer again within 10 minutes
	view("a1", "u2", true, 2)
	view("a2", "u1", true, 1)
	view("a3", "u1", true, 1)
	view("a4", "u1", false, 0) // u1's fourth view within the hour
	clk.Add(11 * time.Minute)
	view("a1", "u1", false, 2) // past 10 minutes, but still 3 this hour
	clk.Add(2 * time.Hour)
	view("a1", "u1", true, 3)
	view("a4", "u1", true, 1)
	// A view refused per article takes nothing from the viewer's hour.
	a, err := vs.count(context.Background(), "a4", "u1")
	if err != nil || a.Counted || a.Limits[1].Remaining != 1 {
		t.Fatalf("a repeated view: %+v %v, want the hourly limit untouched (1 left)", a, err)
	}
}

func TestViewsEndpoint(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	_, m := call(t, "POST", base+"/v1/views", `{"article":"post:1","viewer":"u:1"}`)
	expect(t, m, map[string]any{"counted": true, "total": 1, "retryAfterMs": 0})
	_, m = call(t, "POST", base+"/v1/views", `{"article":"post:1","viewer":"u:1"}`)
	expect(t, m, map[string]any{"counted": false, "total": 1})
	if r := m["retryAfterMs"].(float64); r < 599_000 || r > 600_000 {
		t.Errorf("retryAfterMs %v, want about 10 minutes", r)
	}
	_, m = call(t, "GET", base+"/v1/views?article=post:1", "")
	expect(t, m, map[string]any{"article": "post:1", "total": 1, "degraded": false})
	for body, field := range map[string]string{
		`{"article":"","viewer":"u"}`:        "article",
		`{"article":"a","viewer":""}`:        "viewer",
		`{"article":"a","viewer":"u","x":1}`: "x",
		`{"article":"a","viewer":"u\u200b"}`: "viewer",
	} {
		code, m := call(t, "POST", base+"/v1/views", body)
		if code != 400 || !strings.Contains(m["msg"].(string), field) {
			t.Errorf("%s: %d %v, want 400 naming %s", body, code, m, field)
		}
	}
	if code, _ := call(t, "GET", base+"/v1/views", ""); code != 400 {
		t.Errorf("GET without article: %d", code)
	}
}

func TestViewLimitsAreChecked(t *testing.T) {
	s, err := loadSettings([]string{"COUNTER_VIEWS_PER_ARTICLE=none"})
	if err != nil || s.PerArticle || s.Views.Limits() != 1 {
		t.Fatalf("per-article limit off: %v %+v", err, s.Views)
	}
	for _, kv := range [][]string{
		{"COUNTER_VIEWS_PER_ARTICLE=sliding_log/1"},
		{"COUNTER_VIEWS_PER_ARTICLE=sliding_log:0/10m"},
		{"COUNTER_VIEWS_PER_ARTICLE=none", "COUNTER_VIEWS_PER_VIEWER=none"},
	} {
		if _, err := loadSettings(kv); err == nil || !strings.Contains(err.Error(), "COUNTER_VIEWS_PER_") {
			t.Errorf("%v: %v", kv, err)
		}
	}
}
