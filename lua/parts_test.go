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

// TestLibraryDefinesEveryPartAndKindOnce checks that the library defines
// each part of count.lua and each limiter kind of limit.lua once, and
// registers its two functions under names that change with its source.
func TestLibraryDefinesEveryPartAndKindOnce(t *testing.T) {
	src, fns := Library()
	defined := func(table string) []string {
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^`+table+`\.(\w+) = `).FindAllStringSubmatch(src, -1) {
			got = append(got, m[1])
		}
		return got
	}
	parts := []string{"days", "hours", "lifetime", "month", "months", "release", "reserve", "week", "weeks", "window"}
	if got := defined("parts"); !slices.Equal(got, parts) {
		t.Errorf("the library defines parts %v, want %v", got, parts)
	}
	kinds := []string{"fixed_window", "gcra", "leaky_bucket", "sliding_log", "sliding_window", "token_bucket"}
	if got := defined("kinds"); !slices.Equal(got, kinds) {
		t.Errorf("the library defines kinds %v, want %v", got, kinds)
	}
	lib := strings.TrimPrefix(fns.Count, "freqcap_count_")
	if !strings.HasPrefix(src, "#!lua name=freqcap_"+lib+"\n") || lib == fns.Count || fns.Limit != "freqcap_limit_"+lib {
		t.Errorf("library %.40q... does not name %s and %s after itself", src, fns.Count, fns.Limit)
	}
	for _, fn := range []string{fns.Count, fns.Limit} {
		if strings.Count(src, "register('"+fn+"', ") != 1 {
			t.Errorf("the library does not register %s once", fn)
		}
	}
}
