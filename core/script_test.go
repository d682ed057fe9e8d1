package core

import (
	"strings"
	"testing"
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
		if !strings.Contains(src, "\nkinds."+string(k)+" = function") {
			t.Errorf("rate limiter %s has no function in the library", k)
		}
	}
}
