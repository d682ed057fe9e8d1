package main

import (
	"context"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/proctest"
)

// The example runs against a real counter and callback (signing with make
// run's development key, its sample campaigns) and ends with campaign 42
// blocked for the device it won on, campaign 43 still allowed.
func TestBidderExample(t *testing.T) {
	s := proctest.StartStack(t, []string{"COUNTER_READ_TIMEOUT=1s"}, []string{"CALLBACK_SIGNING_KEYS=" + devKey, "CALLBACK_CAMPAIGNS_FILE=../../dev/campaigns.json"})
	var out strings.Builder
	env := map[string]string{"COUNTER_URL": s.CounterURL, "CALLBACK_URL": s.CallbackURL, "DECIDE_TIMEOUT": "2s"}
	if err := run(context.Background(), &out, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"before the win: 42: allowed", "win notice: 204", "after the win: 42: blocked by day_cap on device (1 of 1)", "after the win: 43: allowed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
