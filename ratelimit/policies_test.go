package ratelimit

import (
	"testing"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
)

func TestInlinePoliciesAreBuiltOnceAndStillChecked(t *testing.T) {
	lim := core.Defaults.Limits
	req := &counting.LimitRequest{Key: "user:1", Rule: counting.Rule{Algorithm: "gcra", Limit: 100, Period: "1s"}}
	a, _, err := Resolve(nil, &lim, req, "")
	if err != nil {
		t.Fatal(err)
	}
	b, it, err := Resolve(nil, &lim, req, "")
	if err != nil || a != b {
		t.Fatalf("the same inline rule: %p then %p (%v), want one policy", a, b, err)
	}
	if it.Subject.ID != "user:1" || it.Spec.Limit != 100 || it.Hits != 1 {
		t.Errorf("item %+v", it)
	}
	bad := &counting.LimitRequest{Key: "user:1", Rule: counting.Rule{Algorithm: "gcra", Limit: 0, Period: "1s"}}
	for range 2 {
		if _, _, err := Resolve(nil, &lim, bad, "items[3]."); err == nil {
			t.Fatal("a rule with limit 0 passed")
		} else if got := err.Error(); len(got) < 9 || got[:9] != "items[3]." {
			t.Errorf("error %q does not name the field", got)
		}
	}
}

func BenchmarkResolveInline(b *testing.B) {
	lim := core.Defaults.Limits
	req := &counting.LimitRequest{Key: "user:1", Rule: counting.Rule{Algorithm: "gcra", Limit: 100, Period: "1s"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Resolve(nil, &lim, req, ""); err != nil {
			b.Fatal(err)
		}
	}
}
