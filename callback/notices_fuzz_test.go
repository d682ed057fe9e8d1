package main

import (
	"maps"
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

// FuzzJournalEntry: any notice reads back from its journal entry as it
// was, and any value in the entry's field either reads as a notice or is
// refused, never a panic.
func FuzzJournalEntry(f *testing.F) {
	f.Add("win", "42", "req-1:1", "", false, "device", "d1", "tagid", "t:7")
	f.Add("click", "c.1", "e", "cr", true, "device", "\x00\xff", "ip", "")
	f.Fuzz(func(t *testing.T, event, cid, eid, crid string, unreserved bool, d1, v1, d2, v2 string) {
		n := notice{event: event, cid: cid, eid: eid, crid: crid, unreserved: unreserved, dims: map[string]string{d1: v1, d2: v2}}
		got := notice{dims: map[string]string{}}
		if err := unpackNotice(packNotice(n), &got); err != nil {
			t.Fatalf("%+v: %v", n, err)
		}
		if got.event != n.event || got.cid != n.cid || got.eid != n.eid || got.crid != n.crid || got.unreserved != n.unreserved ||
			!maps.Equal(got.dims, n.dims) {
			t.Fatalf("%+v read back as %+v", n, got)
		}
		junk := notice{dims: map[string]string{}}
		_ = unpackNotice(event+cid+eid+v1, &junk)
	})
}
