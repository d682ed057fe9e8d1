// Command dashboard renders the freqcap Grafana dashboard without Grafana:
// it runs every panel's queries against a Prometheus (query_range over the
// last -range) and writes one static HTML page of SVG charts laid out on
// the dashboard's own grid. docs/operations.md's screenshot is this page, taken with
// headless Chromium from a real run; with Grafana at hand, use compose's
// observability profile instead.
//
//	go run ./dev/dashboard -prometheus http://127.0.0.1:9090 -out /tmp/freqcap.html
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

type dashboard struct {
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
}

// series is one line of a chart.
type series struct {
	name   string
	points [][2]float64 // unix seconds, value
}

func main() {
	dash := flag.String("dashboard", "dev/observability/grafana/dashboards/freqcap.json", "Grafana dashboard JSON")
	prom := flag.String("prometheus", "http://127.0.0.1:9090", "Prometheus base URL")
	span := flag.Duration("range", 15*time.Minute, "time range up to now")
	out := flag.String("out", "freqcap-dashboard.html", "HTML file to write")
	flag.Parse()
	if err := run(*dash, *prom, *span, *out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

func run(dashPath, prom string, span time.Duration, out string) error {
	b, err := os.ReadFile(dashPath)
	if err != nil {
		return err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	end := time.Now()
	start := end.Add(-span)
	step := max(span/240, time.Second)
	var body strings.Builder
	const unitW, unitH = 66, 34 // pixels per grid column and row
	height := 0
	for _, p := range d.Panels {
		g := p.GridPos
		height = max(height, (g.Y+g.H)*unitH)
		style := fmt.Sprintf("left:%dpx;top:%dpx;width:%dpx;height:%dpx", g.X*unitW, g.Y*unitH, g.W*unitW-8, g.H*unitH-8)
		if p.Type == "row" {
			fmt.Fprintf(&body, "<div class=row style=%q>%s</div>\n", style, html.EscapeString(p.Title))
			continue
		}
		var lines []series
		for _, t := range p.Targets {
			s, err := queryRange(prom, t.Expr, t.LegendFormat, start, end, step)
			if err != nil {
				return fmt.Errorf("panel %q: %w", p.Title, err)
			}
			lines = append(lines, s...)
		}
		fmt.Fprintf(&body, "<div class=panel style=%q><div class=title>%s</div>%s</div>\n", style,
			html.EscapeString(p.Title), chart(lines, p.FieldConfig.Defaults.Unit, g.W*unitW-8, g.H*unitH-40, start, end))
	}
	page := fmt.Sprintf(`<!doctype html><meta charset=utf-8><title>%s</title>
<style>
body{background:#111217;color:#ccccdc;font:12px -apple-system,Helvetica,Arial,sans-serif;margin:12px}
h1{font-size:16px;font-weight:500;margin:0 0 8px}
.grid{position:relative;height:%dpx}
.panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;overflow:hidden}
.row{position:absolute;font-size:14px;font-weight:500;padding-top:8px}
.title{padding:6px 8px;font-weight:500}
.legend{font-size:11px}
</style>
<h1>%s <span style="color:#8e8e8e;font-weight:400">· last %s, rendered %s from %s</span></h1>
<div class=grid>%s</div>`, html.EscapeString(d.Title), height, html.EscapeString(d.Title), span, end.UTC().Format(time.RFC3339),
		html.EscapeString(prom), body.String())
	return os.WriteFile(out, []byte(page), 0o644)
}

var legendVar = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// queryRange runs expr over [start, end] and names each series after
// legend ({{label}} replaced by the series' label).
func queryRange(prom, expr, legend string, start, end time.Time, step time.Duration) ([]series, error) {
	q := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.Itoa(int(step.Seconds()))}}
	resp, err := http.Get(strings.TrimSuffix(prom, "/") + "/api/v1/query_range?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", expr, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, r.Error)
	}
	var out []series
	for _, m := range r.Data.Result {
		s := series{name: legendVar.ReplaceAllStringFunc(legend, func(v string) string {
			return m.Metric[legendVar.FindStringSubmatch(v)[1]]
		})}
		for _, v := range m.Values {
			t, _ := v[0].(float64)
			str, _ := v[1].(string)
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			s.points = append(s.points, [2]float64{t, f})
		}
		if len(s.points) > 0 {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b series) int { return cmp.Compare(a.name, b.name) })
	return out, nil
}

var palette = []string{"#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a"}

// chart draws lines as an SVG of w x h pixels, with the y axis in unit.
func chart(lines []series, unit string, w, h int, start, end time.Time) string {
	if len(lines) == 0 {
		return fmt.Sprintf(`<div style="height:%dpx;display:flex;align-items:center;justify-content:center;color:#8e8e8e">No data</div>`, h)
	}
	legendH := 16 * min(len(lines), 4)
	plotH := h - legendH - 18
	const left = 52
	plotW := w - left - 22
	lo, hi := 0.0, 0.0
	for _, s := range lines {
		for _, p := range s.points {
			lo, hi = math.Min(lo, p[1]), math.Max(hi, p[1])
		}
	}
	if hi == lo {
		hi = lo + 1
	}
	t0, t1 := float64(start.Unix()), float64(end.Unix())
	x := func(t float64) float64 { return left + (t-t0)/(t1-t0)*float64(plotW) }
	y := func(v float64) float64 { return 4 + (hi-v)/(hi-lo)*float64(plotH) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width=%d height=%d font-size=10 fill="#8e8e8e">`, w, plotH+22)
	for i := 0; i <= 4; i++ {
		v := lo + (hi-lo)*float64(i)/4
		fmt.Fprintf(&b, `<line x1=%d x2=%d y1=%.1f y2=%.1f stroke="#2c3235"/><text x=%d y=%.1f text-anchor=end>%s</text>`,
			left, left+plotW, y(v), y(v), left-4, y(v)+3, format(v, unit))
	}
	for i := 0; i <= 4; i++ {
		t := t0 + (t1-t0)*float64(i)/4
		fmt.Fprintf(&b, `<text x=%.1f y=%d text-anchor=middle>%s</text>`, x(t), plotH+18, time.Unix(int64(t), 0).UTC().Format("15:04"))
	}
	for i, s := range lines {
		var pts strings.Builder
		for _, p := range s.points {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p[0]), y(p[1]))
		}
		fmt.Fprintf(&b, `<polyline fill=none stroke=%q stroke-width=1.5 points=%q/>`, palette[i%len(palette)], pts.String())
	}
	b.WriteString("</svg><div class=legend style=\"padding:0 8px\">")
	for i, s := range lines {
		if i == 8 {
			fmt.Fprintf(&b, " … %d more", len(lines)-8)
			break
		}
		last := s.points[len(s.points)-1][1]
		fmt.Fprintf(&b, `<span style="margin-right:12px;white-space:nowrap"><span style="color:%s">▬</span> %s <span style="color:#8e8e8e">%s</span></span>`,
			palette[i%len(palette)], html.EscapeString(cmp.Or(s.name, "value")), format(last, unit))
	}
	b.WriteString("</div>")
	return b.String()
}

// format writes v in a Grafana unit.
func format(v float64, unit string) string {
	switch unit {
	case "s":
		switch a := math.Abs(v); {
		case a == 0:
			return "0"
		case a < 1e-3:
			return fmt.Sprintf("%.0fµs", v*1e6)
		case a < 1:
			return fmt.Sprintf("%.1fms", v*1e3)
		default:
			return fmt.Sprintf("%.1fs", v)
		}
	case "percentunit":
		return fmt.Sprintf("%.0f%%", v*100)
	case "reqps":
		return short(v) + "/s"
	}
	return short(v)
}

func short(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 10 || a == math.Trunc(a):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}
