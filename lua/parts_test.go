package lua

import (
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestPartBits checks what count.lua relies on without checking it on every
// run: each part of it has a bit of its own, a power of two below W (1024),
// and a part that needs another's bit names one that exists.
func TestPartBits(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^parts\.(\w+) = \{bit = (\d+)(?:, needs = (\d+))?`)
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]string{}
	needs := map[string]int{}
	for _, name := range names {
		for _, m := range decl.FindAllStringSubmatch(file(name), -1) {
			bit, _ := strconv.Atoi(m[2])
			if bit <= 0 || bit >= 1024 || bit&(bit-1) != 0 {
				t.Errorf("part %s: bit %d is not a power of two below W = 1024", m[1], bit)
			}
			if other, ok := owner[bit]; ok {
				t.Errorf("parts %s and %s share bit %d", other, m[1], bit)
			}
			owner[bit] = m[1]
			if m[3] != "" {
				needs[m[1]], _ = strconv.Atoi(m[3])
			}
		}
	}
	if len(owner) < 10 {
		t.Fatalf("found %d parts, want every part of count.lua (window, hours, ..., release)", len(owner))
	}
	for part, bit := range needs {
		if _, ok := owner[bit]; !ok {
			t.Errorf("part %s needs bit %d, which no part has", part, bit)
		}
	}
}

// TestCountHoldsThePartsItRuns checks that a count script holds the parts
// asked for and those they run, and no other.
func TestCountHoldsThePartsItRuns(t *testing.T) {
	for _, tt := range []struct {
		parts []string
		want  []string
	}{
		{[]string{"window"}, []string{"window"}},
		{[]string{"hours", "window"}, []string{"days", "hours", "window"}},
		{[]string{"lifetime", "months"}, []string{"days", "lifetime", "months", "window"}},
		{[]string{"release", "window"}, []string{"release", "window"}},
	} {
		src := Count(tt.parts)
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^parts\.(\w+) = `).FindAllStringSubmatch(src, -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Count(%v) defines %v, want %v", tt.parts, got, tt.want)
		}
	}
}
