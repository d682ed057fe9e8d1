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
	// What README shows, line for line: the decisions before the win,
	// then the one that sees it (however many asks it took).
	want := "before the win: 42: allowed\nbefore the win: 43: allowed\nwin notice: 204\n" +
		"after the win: 42: blocked by day_cap on device (1 of 1)\nafter the win: 43: allowed\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant README's:\n%s", out.String(), want)
	}
}
