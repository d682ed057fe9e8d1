package core

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
)

// Every kind that counts as a part of count.lua has its part in the
// library the store calls, and every rate limiter its function.
func TestLibraryHoldsEveryKindsPartAndLimiter(t *testing.T) {
	src, _ := Library()
	for k, kd := range kinds {
		if p, ok := kd.(interface{ partName() string }); ok && !strings.Contains(src, "\nparts."+p.partName()+" = {") {
			t.Errorf("kind %s counts with part %s, which the library does not define", k, p.partName())
		}
	}
	for _, k := range Limiters() {
		if !strings.Contains(src, "\nkinds."+string(k)+" = {") {
			t.Errorf("rate limiter %s has no function in the library", k)
		}
	}
}

// TestLimiterArgumentsAreTheOnesTheirKindsRead: each limiter kind's Go
// side sends as many arguments as its Lua function reads (its nargs), and
// limit.lua's grace is limitGraceMs.
func TestLimiterArgumentsAreTheOnesTheirKindsRead(t *testing.T) {
	src, _ := Library()
	e := &env{now: time.Now(), loc: time.UTC}
	for _, k := range Limiters() {
		m := regexp.MustCompile(`\nkinds\.` + string(k) + ` = \{nargs = (\d+),`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("kind %s declares no nargs in the library", k)
		}
		it := counting.Item{Scope: counting.Scope{Policy: "p"}, Subject: counting.Subject{ID: "k"},
			Spec: counting.Spec{Kind: k, Limit: 100, PeriodMs: 60000}, Hits: 1}
		_, args := limitKeysArgs(&it, e, "")
		// now, cost, then the kind's name and its arguments
		if own := args[3:]; strconv.Itoa(len(own)) != m[1] {
			t.Errorf("kind %s sends %d arguments %q, its Lua function reads %s", k, len(own), own, m[1])
		}
	}
	if !strings.Contains(src, "\nlocal grace = "+strconv.Itoa(limitGraceMs)+"\n") {
		t.Errorf("limit.lua's grace is not limitGraceMs (%d)", limitGraceMs)
	}
}
