package lua

import (
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// TestCountLibraryDefinesEveryPartOnce checks that the count library
// defines each part of count.lua once and registers its function under a
// name that changes with its source.
func TestCountLibraryDefinesEveryPartOnce(t *testing.T) {
	src, fn := CountLibrary()
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^parts\.(\w+) = `).FindAllStringSubmatch(src, -1) {
		got = append(got, m[1])
	}
	want := []string{"days", "hours", "lifetime", "month", "months", "release", "reserve", "week", "weeks", "window"}
	if !slices.Equal(got, want) {
		t.Errorf("the library defines %v, want %v", got, want)
	}
	lib := strings.TrimPrefix(fn, "freqcap_count_")
	if !strings.HasPrefix(src, "#!lua name=freqcap_"+lib+"\n") || !strings.Contains(src, "register('"+fn+"', ") || lib == fn {
		t.Errorf("library %.40q... does not register %s under its own name", src, fn)
	}
}
