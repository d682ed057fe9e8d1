package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// report gathers every round's results and writes the medians.
type report struct {
	settings        settings
	bytesPerCounter float64
	order           []string
	runs            map[string][]result
	bases           map[string][]result // each round's baseline run before the scenario
	baselines       []float64
}

func (r *report) add(name string, res, base result) {
	if r.runs == nil {
		r.runs = map[string][]result{}
	}
	if _, ok := r.runs[name]; !ok {
		r.order = append(r.order, name)
	}
	r.runs[name] = append(r.runs[name], res)
	if base.rate > 0 {
		if r.bases == nil {
			r.bases = map[string][]result{}
		}
		r.bases[name] = append(r.bases[name], base)
		r.baselines = append(r.baselines, base.rate)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// span is the least and the greatest of v (0, 0 when empty).
func span(v []float64) (lo, hi float64) {
	if len(v) == 0 {
		return 0, 0
	}
	return slices.Min(v), slices.Max(v)
}

func (r *report) med(name string, f func(result) float64) float64 {
	var v []float64
	for _, res := range r.runs[name] {
		v = append(v, f(res))
	}
	return median(v)
}

func medDur(r *report, name string, f func(result) time.Duration) time.Duration {
	return time.Duration(r.med(name, func(x result) float64 { return float64(f(x)) }))
}

// target is one goal of the bench and how to read it off the results.
type target struct {
	what string
	got  func(r *report) (float64, string)
	ok   func(v float64) bool
	// ratio is the least ratio to the baseline a ratio target asks (0
	// for another kind of target).
	ratio float64
}

// ratioTarget asks name's ratio to the baseline to be at least min.
func ratioTarget(what, name string, min float64) target {
	return target{what, ratioOf(name), func(v float64) bool { return v >= min }, min}
}

var targets = map[string]target{
	"hot-read":       ratioTarget("ratio >= 0.80", "hot-read", 0.80),
	"cold-read":      ratioTarget("ratio >= 0.60", "cold-read", 0.60),
	"write":          ratioTarget("ratio >= 0.40", "write", 0.40),
	"write-batch-20": ratioTarget("notices/s >= 0.80 of baseline req/s", "write-batch-20", 0.80),
	"end-to-end":     ratioTarget("ratio >= 0.35, no loss", "end-to-end", 0.35),
	"addfreq":        ratioTarget("ratio >= 0.50", "addfreq", 0.50),
	"batch-50": {"items/s >= 15x cold read", func(r *report) (float64, string) {
		// Per round: batch items/s over the cold single-read req/s of that round.
		var v []float64
		for i, b := range r.runs["batch-50"] {
			if i < len(r.runs["cold-read"]) && r.runs["cold-read"][i].rate > 0 {
				v = append(v, b.rate/r.runs["cold-read"][i].rate)
			}
		}
		return median(v), fmt.Sprintf("%.1fx", median(v))
	}, func(v float64) bool { return v >= 15 }, 0},
	"latency-hot": {"p99 <= 1 ms", func(r *report) (float64, string) {
		// The baseline row at the same rate is the floor this machine and
		// the in-process load generator set.
		p := medDur(r, "latency-hot", func(x result) time.Duration { return x.p99 })
		return float64(p), ms(p)
	}, func(v float64) bool { return time.Duration(v) <= time.Millisecond }, 0},
	"latency-freeze": {"p99 <= 7 ms (deadline + 2)", func(r *report) (float64, string) {
		p := medDur(r, "latency-freeze", func(x result) time.Duration { return x.p99 })
		return float64(p), ms(p)
	}, func(v float64) bool { return time.Duration(v) <= 7*time.Millisecond }, 0},
	"latency-cold": {"p99 <= 2 ms", func(r *report) (float64, string) {
		p := medDur(r, "latency-cold", func(x result) time.Duration { return x.p99 })
		return float64(p), ms(p)
	}, func(v float64) bool { return time.Duration(v) <= 2*time.Millisecond }, 0},
}

func init() {
	// Every limiter kind alike: at least half of bare net/http.
	for _, k := range []string{"fixed_window", "sliding_log", "sliding_window", "leaky_bucket", "token_bucket", "gcra"} {
		targets["limit-"+k] = ratioTarget("ratio >= 0.50", "limit-"+k, 0.50)
	}
}

func ratioOf(name string) func(r *report) (float64, string) {
	return func(r *report) (float64, string) {
		v := r.med(name, func(x result) float64 { return x.ratio })
		return v, fmt.Sprintf("%.2f", v)
	}
}

var units = map[string]string{"batch-50": "items/s", "write-batch-20": "notices/s", "getfreq-batch-50": "items/s", "redis-script": "scripts/s",
	"limit-fixed_window": "checks/s", "limit-sliding_log": "checks/s", "limit-sliding_window": "checks/s",
	"limit-leaky_bucket": "checks/s", "limit-token_bucket": "checks/s", "limit-gcra": "checks/s",
	"decide-50-http": "calls/s", "decide-50-direct": "calls/s", "decide-50-ids-http": "calls/s", "decide-50-ids-direct": "calls/s", "decide-50-ids-saturated": "decides/s", "overshoot": "auctions/s"}

// display is the order of the table's rows.
var display = []string{"hot-read", "cold-read", "batch-50", "write", "write-batch-20", "end-to-end", "addfreq", "getfreq-batch-50",
	"limit-fixed_window", "limit-sliding_log", "limit-sliding_window", "limit-leaky_bucket", "limit-token_bucket", "limit-gcra",
	"redis-script", "latency-baseline", "latency-hot", "latency-cold", "latency-win", "latency-freeze", "decide-50-http", "decide-50-direct", "decide-50-ids-http", "decide-50-ids-direct", "decide-50-ids-saturated", "overshoot"}

func (r *report) markdown() string {
	slices.SortStableFunc(r.order, func(a, b string) int { return slices.Index(display, a) - slices.Index(display, b) })
	var b strings.Builder
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	fmt.Fprintf(&b, "# freqcap benchmark results\n\n")
	fmt.Fprintf(&b, "- date: %s\n- commit: %s\n- machine: %s\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(string(commit)), machine())
	fmt.Fprintf(&b, "- method: `make bench`; %d rounds of %s per scenario, each right after a baseline run; wrk -t2 -c50; medians of %d rounds; constant-rate runs with vegeta at %d req/s; counter read deadline %s (saturated runs queue past the production 5 ms; degraded answers would flatter throughput)\n",
		r.settings.rounds, r.settings.duration, r.settings.rounds, r.settings.rate, readTimeout)
	if r.settings.journalOwn {
		b.WriteString("- callback's journal in a redis-server of its own (BENCH_JOURNAL_REDIS=own, CALLBACK_JOURNAL_REDIS_URL); the Redis CPU column adds both\n")
	}
	lo, hi := span(r.baselines)
	fmt.Fprintf(&b, "- baseline (bare net/http, 13 bytes): median %.0f req/s, %.0f-%.0f across the runs before each scenario; a ratio is each round's scenario over its own baseline, the rounds' in brackets\n\n",
		median(r.baselines), lo, hi)
	b.WriteString("| scenario | throughput | vs baseline | p50 | p99 | p99.9 | CPU % counter / callback / redis / load | target | met | notes |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range r.order {
		b.WriteString(r.row(name))
	}
	met := "no"
	if r.bytesPerCounter <= 340 {
		met = "yes"
	}
	fmt.Fprintf(&b, "\nRedis bytes per device counter (day String + hour Hash with 3 fields, UUID ids, from INFO used_memory over %d counters): **%.0f B** (target <= 340 B: %s).\n",
		r.settings.fill, r.bytesPerCounter, met)
	b.WriteString(r.budget())
	b.WriteString("\nCPU profiles of round 1 are in `bench/out/profiles/` (`go tool pprof -top bench/out/profiles/<scenario>-counter.pprof`).\n")
	return b.String()
}

// row is a scenario's line of the table: its medians, each round's ratio,
// its target and whether it is met.
func (r *report) row(name string) string {
	runs := r.runs[name]
	unit := units[name]
	if unit == "" {
		unit = "req/s"
	}
	cpu := func(p string) string {
		// The journal's own Redis (BENCH_JOURNAL_REDIS=own) counts
		// with Redis.
		return fmt.Sprintf("%.0f", r.med(name, func(x result) float64 { return x.cpu[p] + x.cpu["journal-"+p] }))
	}
	load := "wrk"
	switch {
	case name == "redis-script":
		load = "redis-benchmark"
	case name == "decide-50-ids-saturated": // wrk's
	case strings.HasPrefix(name, "latency"), strings.HasPrefix(name, "decide"):
		load = "" // vegeta runs inside the bench process
	}
	loadCPU := "-"
	if load != "" {
		loadCPU = cpu(load)
	}
	ratio := "-"
	if runs[0].ratio > 0 {
		ratio = fmt.Sprintf("%.2f", r.med(name, func(x result) float64 { return x.ratio }))
		if len(runs) > 1 {
			// Each round's own: how far the median can be trusted.
			each := make([]string, len(runs))
			for i, x := range runs {
				each[i] = fmt.Sprintf("%.2f", x.ratio)
			}
			ratio += " (" + strings.Join(each, " / ") + ")"
		}
	}
	p999 := "-"
	if runs[0].p999 > 0 {
		p999 = ms(medDur(r, name, func(x result) time.Duration { return x.p999 }))
	}
	goal, met := r.target(name)
	return fmt.Sprintf("| %s | %.0f %s | %s | %s | %s | %s | %s / %s / %s / %s | %s | %s | %s |\n",
		name, r.med(name, func(x result) float64 { return x.rate }), unit, ratio,
		ms(medDur(r, name, func(x result) time.Duration { return x.p50 })),
		ms(medDur(r, name, func(x result) time.Duration { return x.p99 })), p999,
		cpu("counter"), cpu("callback"), cpu("redis"), loadCPU, goal, met, runs[len(runs)-1].note)
}

// budget is the table of the CPU each unit of work (a request, an item,
// a notice) costs each process, beside what a request costs the bare
// server and wrk in the baseline run before it: on a machine whose cores
// every process shares, a ratio is about the baseline's CPU per request
// over the scenario's, so this says where a ratio goes.
func (r *report) budget() string {
	var b strings.Builder
	for _, name := range r.order {
		runs, bases := r.runs[name], r.bases[name]
		if len(bases) == 0 || len(bases) != len(runs) {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nCPU per unit of work, in us (a process's CPU over the units a second; medians of the rounds), and the baseline's per request in the run before each round; the machine's cores busy (all of its work, the kernel's too; and stolen by its hypervisor) during each. With every process on the same cores, a ratio is about the baseline's CPU per request over the scenario's (\"ratio of alls\"); at a ratio target, a unit may cost the baseline's request over the target, of which Redis and the load generator keep what they take: the rest is what the target leaves the services (counter and callback), against the bare server's own CPU per request, the least any net/http server spends:\n\n")
			b.WriteString("| scenario | counter | callback | redis | load | all | baseline: server / load / all | ratio of alls | the target leaves the services | busy: scenario / baseline |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		}
		per := func(x result, procs ...string) float64 {
			var pct float64
			for _, p := range procs {
				pct += x.cpu[p] + x.cpu["journal-"+p]
			}
			return pct / 100 * 1e6 / x.rate
		}
		every := []string{"counter", "callback", "redis", "wrk"}
		med := func(rs []result, procs ...string) float64 {
			v := make([]float64, 0, len(rs))
			for _, x := range rs {
				if x.rate > 0 {
					v = append(v, per(x, procs...))
				}
			}
			return median(v)
		}
		busy := func(rs []result) string {
			var v, st []float64
			for _, x := range rs {
				v, st = append(v, x.busy), append(st, x.steal)
			}
			return fmt.Sprintf("%.0f%% (%.0f%% stolen)", median(v), median(st))
		}
		all, baseAll := med(runs, every...), med(bases, "baseline", "wrk")
		// At a ratio target, a unit may cost the baseline's request over
		// the ratio, all told; Redis and the load generator keep theirs.
		left := "-"
		if t := targets[name]; t.ratio > 0 {
			left = fmt.Sprintf("%.1f", baseAll/t.ratio-med(runs, "redis")-med(runs, "wrk"))
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f / %.1f / %.1f | %.2f | %s | %s / %s |\n",
			name, med(runs, "counter"), med(runs, "callback"), med(runs, "redis"), med(runs, "wrk"), all,
			med(bases, "baseline"), med(bases, "wrk"), baseAll, baseAll/all, left, busy(runs), busy(bases))
	}
	return b.String()
}

// target is a scenario's target and whether the medians meet it, "-"
// for a scenario without one.
func (r *report) target(name string) (goal, met string) {
	t, ok := targets[name]
	if !ok {
		return "-", "-"
	}
	v, shown := t.got(r)
	if t.ok(v) {
		return t.what, "yes (" + shown + ")"
	}
	return t.what, "no (" + shown + ")"
}

func (r *report) write() error {
	md := r.markdown()
	fmt.Print("\n" + md)
	return os.WriteFile(r.settings.results, []byte(md), 0o644)
}
