package main

import (
	"net/url"
	"slices"
	"testing"

	"github.com/freqcap/freqcap/shared/ids"
)

// FuzzParseNotice: whatever an exchange sends, a notice is refused with a
// reason or kept with a valid cid, eid and dimensions of the schema.
func FuzzParseNotice(f *testing.F) {
	for _, seed := range []string{
		"cid=42&device=abc&bundle=com.foo&eid=a1:i1&price=1.2",
		"cid=42&device=${DEVICE}",
		"cid=42&bundle=AUDIT",
		"cid=4:2&device=a%20b",
		"cid=42&device=ab%E2%80%8Bc&tagid=7&tagid=8",
		"device=x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		form, err := url.ParseQuery(raw)
		if err != nil {
			return // the handler answers 400 for these
		}
		n, rej := parseNotice("win", testSchema, form)
		if rej != nil {
			if rej.reason == "" || rej.err == nil {
				t.Fatalf("%q: a refusal without a reason", raw)
			}
			return
		}
		if !ids.ValidCID(n.cid) || !ids.ValidID(n.eid) || len(n.dims) == 0 {
			t.Fatalf("%q kept as %+v", raw, n)
		}
		for name, id := range n.dims {
			if !slices.Contains(testSchema.Dimensions, name) || !ids.ValidID(id) {
				t.Fatalf("%q kept dimension %s=%q", raw, name, id)
			}
		}
	})
}
