package core

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/counting"
)

// Escape replaces % : { } and nothing else, wherever they stand, and a
// key's tag ends with its id escaped.
func TestEscapeReplacesItsFourBytesAnywhere(t *testing.T) {
	want := strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D")
	rng := rand.New(rand.NewPCG(3, 5))
	const alphabet = "a9-_.%:{}é"
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		s := sb.String()
		if got := Escape(s); got != want.Replace(s) {
			t.Fatalf("Escape(%q) = %q, want %q", s, got, want.Replace(s))
		}
		it := counting.Item{Scope: counting.Scope{Event: "win", Campaign: "42"}, Subject: counting.Subject{Dim: "device", ID: s}}
		if got := Tagged("freq:", &it); got != "freq:{win:device:42:"+want.Replace(s)+"}" {
			t.Fatalf("Tagged of id %q = %q", s, got)
		}
	}
}

// Every kind shared/counting names is served: kindOf knows it, and kinds
// (what validation and listings go by) holds the same.
func TestKindOfServesEveryKind(t *testing.T) {
	files, err := filepath.Glob("../shared/counting/*.go")
	if err != nil || len(files) == 0 {
		t.Fatal(files, err)
	}
	var names []counting.Kind
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\w+\s+Kind = "(\w+)"`).FindAllSubmatch(src, -1) {
			names = append(names, counting.Kind(m[1]))
		}
	}
	if len(names) == 0 {
		t.Fatal("no kind found in shared/counting")
	}
	for _, k := range names {
		if kindOf(k) == nil {
			t.Errorf("kindOf(%q) is nil", k)
		}
		if _, ok := kinds[k]; !ok {
			t.Errorf("kinds has no %q", k)
		}
	}
	if len(kinds) != len(names) {
		t.Errorf("kinds holds %d, shared/counting names %d", len(kinds), len(names))
	}
	if kindOf("nope") != nil {
		t.Error("kindOf of an unknown name is not nil")
	}
}
