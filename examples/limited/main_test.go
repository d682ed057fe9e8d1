package main

import (
	"context"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/proctest"
)

// Against a real counter with dev/limits.yaml: 5 attempts admitted, the
// 6th refused by the counter, the last two refused locally.
func TestLimitedExample(t *testing.T) {
	s := proctest.StartStack(t, []string{"COUNTER_LIMITS_FILE=../../dev/limits.yaml", "COUNTER_READ_TIMEOUT=1s"}, nil)
	var out strings.Builder
	if err := run(context.Background(), &out, func(k string) string { return map[string]string{"COUNTER_URL": s.CounterURL, "CHECK_TIMEOUT": "2s"}[k] }); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"attempt 1: admitted, 4 left", "attempt 5: admitted, 0 left", "attempt 6: refused by the counter, retry in", "attempt 7: refused here", "attempt 8: refused here"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
