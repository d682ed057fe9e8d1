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
