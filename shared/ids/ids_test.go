package ids

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidCID(t *testing.T) {
	for s, want := range map[string]bool{
		"42": true, "li-7.a_B": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a:b": false, "a b": false, "{x}": false, "é": false,
	} {
		if got := ValidCID(s); got != want {
			t.Errorf("ValidCID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"abc": true, "6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f": true, "com.foo:bar{x}": true, "设备": true,
		strings.Repeat("x", 128): true,
		"":                       false, strings.Repeat("x", 129): false, "a b": false, "a\tb": false, "a\x00b": false,
		"a\x7fb": false, "a\u00a0b": false, "a\u2028b": false, "\xff": false,
		// Invisible format characters make look-alike ids.
		"a\u200bb": false, "\ufeffabc": false, "a\u200db": false, "a\u2060b": false, "a\u202eb": false, "a\u00adb": false,
		"émoji😀": true,
		// Default-ignorable and blank-rendering code points outside Cf.
		"\u3164": false, "a\u3164b": false, "a\uffa0b": false, "a\u2800b": false, "a\u034fb": false, "a\ufe0fb": false,
		"a\u115fb": false, "a\u1160b": false, "a\U000e0100b": false, "a\u3000b": false, "a\u180eb": false,
		"한글": true, "\u2801\u2803": true, "\u2714\ufe0f": false,
		// U+FFFD is valid UTF-8 that shows; a byte that is not UTF-8 is not.
		"a\ufffdb": true, "a\xedb": false, "\xed\xa0\x80": false,
	} {
		if got := ValidID(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidKey(t *testing.T) {
	for s, want := range map[string]bool{
		"user 42": true, "설명 키": true, strings.Repeat("k", 256): true,
		"": false, strings.Repeat("k", 257): false, "a\u00a0b": false, "a\u3164b": false, "a\u2800b": false,
		"a\u200bb": false, "a\tb": false, "\xff": false,
	} {
		if got := ValidKey(s); got != want {
			t.Errorf("ValidKey(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestRandomIDsDifferAndAreValid(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := Random("cb-")
		if seen[id] || !ValidID(id) || !strings.HasPrefix(id, "cb-") {
			t.Fatalf("Random gave %q: repeated, invalid or without its prefix", id)
		}
		seen[id] = true
	}
}

// FuzzValidID: ValidID answers what IDRule says of every string: 1-128
// bytes of valid UTF-8 with no rune unseen (the space included).
func FuzzValidID(f *testing.F) {
	fuzzRule(f, "ValidID", ValidID, 128, false, "abc", "设备", "a b")
}

// FuzzValidKey: ValidKey's byte-at-a-time ASCII path answers what the rule
// says of every string: valid UTF-8 whose every rune but the space is not
// unseen.
func FuzzValidKey(f *testing.F) {
	fuzzRule(f, "ValidKey", ValidKey, 256, true, "user 42", "설명 키", "a\tb")
}

// fuzzRule fuzzes valid against the rule it keeps: 1-most bytes of valid
// UTF-8 with no rune unseen, the space allowed when space is. Both rules'
// edge cases seed it, with seeds of valid's own.
func fuzzRule(f *testing.F, name string, valid func(string) bool, most int, space bool, seeds ...string) {
	for _, s := range append(seeds, "a\u00a0b", "\xff", "a\x7fb", "\ufffd", "a\u200bb", "\xed\xa0\x80") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) > 0 && len(s) <= most && utf8.ValidString(s)
		for _, r := range s {
			want = want && (space && r == ' ' || !unseen(r))
		}
		if got := valid(s); got != want {
			t.Fatalf("%s(%q) = %v, want %v", name, s, got, want)
		}
	})
}
