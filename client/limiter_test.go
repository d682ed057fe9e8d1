package client_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// checksSent reads how many checks of a policy reached the counter.
func checksSent(t *testing.T, policy string) float64 {
	t.Helper()
	resp, err := http.Get(counterOpsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, m := range fams["freqcap_counter_limit_checks_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "policy" && l.GetValue() == policy {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestLocalLimiterStopsSendingWhatWouldBeRefused(t *testing.T) {
	l, err := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Local: true, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tenant, before := fresh("tenant"), checksSent(t, "export")
	var allowed, local int
	for range 20 {
		v, err := l.Allow(ctx, "export", tenant)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed {
			allowed++
		}
		if v.Local {
			local++
			if v.Allowed || v.RetryAfter() <= 0 {
				t.Fatalf("a local refusal: %+v", v)
			}
		}
	}
	if allowed != 5 {
		t.Fatalf("admitted %d of 20, want the policy's 5", allowed)
	}
	// 5 admitted by the counter, the 6th refused by it with a Retry-After;
	// the local limiter answers the other 14 until then.
	if sent := checksSent(t, "export") - before; sent != 6 || local != 14 {
		t.Fatalf("%v checks reached the counter, %d answered locally; want 6 and 14", sent, local)
	}
}

// The local limiter is never stricter than the counter: on a policy of 5 a
// minute and 20 a day, 5 hits are refused for at most the minute, as the
// counter refuses them (a local rate at the policy's slowest limit
// refused for over an hour).
func TestLocalLimiterIsNeverStricterThanTheCounter(t *testing.T) {
	l, err := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Local: true, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	alice, bob := fresh("alice"), fresh("bob")
	for i := range 5 {
		if v, err := l.Allow(ctx, "login", alice); err != nil || !v.Allowed {
			t.Fatalf("hit %d: %+v %v", i, v, err)
		}
	}
	v, err := l.Allow(ctx, "login", alice)
	if err != nil || v.Allowed || v.Local || v.RetryAfter() <= 0 || v.RetryAfter() > time.Minute {
		t.Fatalf("the 6th hit: %+v %v, want refused by the counter for at most a minute", v, err)
	}
	counter := v.RetryAfter()
	v, err = l.Allow(ctx, "login", alice)
	if err != nil || v.Allowed || !v.Local || v.RetryAfter() > counter {
		t.Fatalf("the 7th hit: %+v %v, want refused locally for at most the counter's %s", v, err, counter)
	}
	// Another key, and a smaller cost than the one refused, still ask.
	if v, err := l.Allow(ctx, "login", bob); err != nil || !v.Allowed || v.Local {
		t.Errorf("another key: %+v %v, want admitted by the counter", v, err)
	}
}

func TestLimiterLearnsRetryAfterFromARefusal(t *testing.T) {
	// Two callers share the key: the second's local limiter knows nothing
	// of the first's checks, so its first refusal comes from the counter;
	// then it holds off until the Retry-After.
	a, _ := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Token: testToken})
	b, _ := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Local: true, Token: testToken})
	ctx := context.Background()
	shared := fresh("shared")
	for range 3 {
		if v, err := a.Allow(ctx, "api", shared); err != nil || !v.Allowed {
			t.Fatalf("caller a: %+v %v", v, err)
		}
	}
	v, err := b.Allow(ctx, "api", shared)
	if err != nil || v.Allowed || v.Local || v.RetryAfter() <= 0 {
		t.Fatalf("caller b's first check: %+v %v, want refused by the counter", v, err)
	}
	v, err = b.Allow(ctx, "api", shared)
	if err != nil || v.Allowed || !v.Local || v.RetryAfter() <= 0 || v.RetryAfter() > time.Minute {
		t.Fatalf("caller b's second check: %+v %v, want refused locally until the retry-after", v, err)
	}
}

func TestLimiterChecksInlineRulesAndFailsOpen(t *testing.T) {
	l, _ := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Token: testToken})
	ctx := context.Background()
	req := counting.LimitRequest{Key: "inline-" + strconv.FormatInt(time.Now().UnixNano(), 36), Rule: counting.Rule{Algorithm: counting.LeakyBucket, Limit: 10, Period: "1s", Capacity: 2}}
	// The first leaves at once; the second waits its turn, 100 ms after
	// the first less the time between the two checks (a real clock).
	for i, want := range []int64{0, 100} {
		v, err := l.Check(ctx, req)
		if err != nil || !v.Allowed || v.DelayMs > want || v.DelayMs < want/2 {
			t.Fatalf("queued check %d: %+v %v, want a delay of about %d ms", i, v, err, want)
		}
	}
	req.Limit = 0
	if _, err := l.Check(ctx, req); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("an invalid check: %v", err)
	}
	down, _ := client.NewLimiter("http://127.0.0.1:1", client.LimiterOptions{})
	v, err := down.Allow(ctx, "api", "k")
	if err == nil || !v.Allowed || !v.Degraded {
		t.Fatalf("counter down: %+v %v, want admitted, degraded, with an error", v, err)
	}
}
