package core

import (
	"strings"
	"testing"
)

// Every kind that counts as a part of count.lua has its part in the count
// library the store calls.
func TestCountLibraryHoldsEveryKindsPart(t *testing.T) {
	src, _ := CountLibrary()
	for k, kd := range kinds {
		if p, ok := kd.(interface{ partName() string }); ok && !strings.Contains(src, "\nparts."+p.partName()+" = {") {
			t.Errorf("kind %s counts with part %s, which the count library does not define", k, p.partName())
		}
	}
}
