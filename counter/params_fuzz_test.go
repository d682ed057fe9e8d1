package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/freqcap/freqcap/campaign"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
)

// fuzzParser is the parser of a counter on its defaults, and what it
// checks against.
type fuzzParser struct {
	*campaign.Parser
	s Settings
}

func newFuzzParser(t testing.TB) fuzzParser {
	s, err := loadSettings(nil)
	if err != nil {
		t.Fatal(err)
	}
	return fuzzParser{newParser(s), s}
}

// valid checks what a parsed query promises the store.
func (p fuzzParser) valid(t *testing.T, in string, q Query) {
	t.Helper()
	if !ids.ValidCID(q.CID) || !slices.Contains(p.s.Events, q.Event) || len(q.Dims) == 0 || (q.EID != "" && !ids.ValidID(q.EID)) {
		t.Fatalf("%q parsed as %+v", in, q)
	}
	for _, d := range q.Dims {
		if !slices.Contains(p.s.Dimensions, d.Name) || !ids.ValidID(d.ID) {
			t.Fatalf("%q parsed dimension %+v", in, d)
		}
	}
	if !slices.IsSorted(q.Windows) || len(q.Windows) > campaign.MaxWindows {
		t.Fatalf("%q parsed windows %v", in, q.Windows)
	}
	for _, w := range q.Windows {
		if w < 1 || w > p.s.MaxWindowHours {
			t.Fatalf("%q parsed window %d", in, w)
		}
	}
}

// FuzzParseQuery: a query string is a 400 or a valid query, never a
// silently dropped parameter or a panic.
func FuzzParseQuery(f *testing.F) {
	for _, seed := range []string{
		"cid=42&device=abc&bundle=com.foo&tagid=7&windowHours=3",
		"cid=42&device=abc&windowHours=2,24,2&paceWindowSec=600&eid=e1",
		"cid=42&device=abc&eid=x%zz",
		"cid=42;device=abc",
		"cid=42&device=ab%E2%80%8Bc",
		"cid=42&device=a&device=b&windowHours=0",
	} {
		f.Add(seed)
	}
	p := newFuzzParser(f)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := p.FromQuery(raw, nil)
		// The one-pass parser agrees with url.ParseQuery's values.
		vals, verr := httpjson.Query(&http.Request{URL: &url.URL{RawQuery: raw}})
		var want Query
		if verr == nil {
			want, verr = p.FromURL(vals, nil)
		}
		if (err == nil) != (verr == nil) || err == nil && !reflect.DeepEqual(q, want) {
			t.Fatalf("%q: FromQuery %+v, %v; url.ParseQuery and FromURL %+v, %v", raw, q, err, want, verr)
		}
		if err != nil {
			return
		}
		p.valid(t, raw, q)
	})
}

// FuzzDecodeBatch: a batch body is a 400 or items that each parse to a
// valid query or an error of their own.
func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"cid":"1","dims":{"device":"d"},"windowHours":[3,24]}]}`,
		`{"items":[{"cid":"1","dims":{"device":"d"}}]}}`,
		`{"items":[{"cid":"1","dims":{"devise":"d"},"eid":"\u200b"}]}`,
		`{"items":[]}`,
		`not json`,
	} {
		f.Add([]byte(seed))
	}
	p := newFuzzParser(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req counting.BatchRequest
		r := httptest.NewRequest(http.MethodPost, "/v1/freq/batch", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if err := decodeBatch(httptest.NewRecorder(), r, &req, func() int { return len(req.Items) }, 1000); err != nil {
			return
		}
		for _, it := range req.Items {
			if q, err := p.FromItem(it, 0); err == nil {
				p.valid(t, string(body), q)
			}
		}
	})
}
