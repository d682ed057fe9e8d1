package main

import (
	"strings"
	"testing"
)

// A function's time in INFO commandstats holds the commands it calls,
// which Redis counts again as commands of their own: the total counts
// them once.
func TestPerNoticeCountsAFunctionsCallsOnce(t *testing.T) {
	inner := innerCalls()
	for _, name := range []string{"zadd", "hincrby", "incrby", "pexpire"} {
		if !inner[name] {
			t.Errorf("the counting library calls %s, not found", name)
		}
	}
	if inner["xadd"] || inner["fcall"] {
		t.Errorf("xadd and fcall are sent by the services: %v", inner)
	}
	stats := cmdStats{"fcall": {1010, 24800}, "zadd": {1010, 4400}, "hincrby": {1010, 2100}, "xadd": {1000, 1200}, "ping": {3, 1}}
	got := stats.perNotice(1000, inner)
	want := "26.0 µs in commands: fcall 24.8 µs (1.01 calls), xadd 1.2 µs (1.00 calls); inside the functions' time: zadd 4.4 µs (1.01 calls), hincrby 2.1 µs (1.01 calls)"
	if got != want {
		t.Errorf("perNotice:\n got %s\nwant %s", got, want)
	}
	if !strings.HasPrefix(stats.perNotice(1000, nil), "32.5 µs") {
		t.Errorf("without inner calls every command counts: %s", stats.perNotice(1000, nil))
	}
}

// The budget table gives each process's CPU per unit of work, the
// baseline's per request, and what a ratio target leaves the services.
func TestBudgetGivesTheCPUPerUnit(t *testing.T) {
	var r report
	// 20,000 checks/s: the counter at 80% of a core is 40 us a check,
	// Redis at 30% 15 us, wrk at 30% 15 us; the baseline's 50,000 req/s
	// at 75% and 50% are 15 and 10 us.
	base := result{rate: 50000, cpu: map[string]float64{"baseline": 75, "wrk": 50}, busy: 90}
	r.add("limit-gcra", result{rate: 20000, cpu: map[string]float64{"counter": 80, "redis": 30, "wrk": 30}, busy: 85, steal: 1}, base)
	r.add("latency-hot", result{rate: 5000, cpu: map[string]float64{"counter": 40}}, result{})
	got := r.budget()
	// 25 / 70 = 0.36; at 0.50 a check may cost 50 us, Redis and wrk keep 30.
	want := "| limit-gcra | 40.0 | 0.0 | 15.0 | 15.0 | 70.0 | 15.0 / 10.0 / 25.0 | 0.36 | 20.0 | 85% (1% stolen) / 90% (0% stolen) |\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("budget:\n got %s\nwant a table ending in %s", got, want)
	}
	if strings.Contains(got, "latency-hot") {
		t.Errorf("a run without a baseline has no budget: %s", got)
	}
}
