package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/counting"
)

// FuzzDecideJSON: a decide request the fast path decodes is the one
// httpjson.Unmarshal decodes from the same bytes, and one it refuses the
// fast path leaves to it.
func FuzzDecideJSON(f *testing.F) {
	for _, seed := range []string{
		`{"identities":{"device":"6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f","bundle":"com.foo"},"candidates":[{"cid":"42"},{"cid":"43","crid":"c-1"}]}`,
		`{"reserved":true,"identities":{"device":"d"},"candidates":[{"cid":"1"}]}`,
		` { "candidates" : [ ] , "identities" : { } , "reserved" : false } `,
		`{"identities":null,"candidates":[{"cid":"1"}]}`,
		`{"identities":{"device":"a","device":"b"},"candidates":[{"cid":"1"}]}`,
		`{"identities":{"device":"a\u0041"},"candidates":[{"cid":"1"}]}`,
		`{"identities":{"device":1},"candidates":[{"cid":"1"}]}`,
		`{"candidates":[{"cid":"1","cid":"2"}]}`,
		`{"candidates":[{"cid":"1","crid":null}]}`,
		`{"candidates":[{"CID":"1"}]}`,
		`{"candidates":[{"cid":"1","other":1}]}`,
		`{"candidates":[{"cid":"1"},]}`,
		`{"candidates":[{"cid":"ü"}]}`,
		"{\"candidates\":[{\"cid\":\"\xff\"}]}",
		`{"candidates":[{"cid":"1"}]} x`,
		`{"reserved":true,"reserved":false}`,
		`{"reserved":tru}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) { fastAgrees(t, b, decodeDecideFast) })
}

// TestDecideJSONTakesThePlainForm: the decide the client's DecideIDs sends
// goes the fast way, and decodes to what was sent.
func TestDecideJSONTakesThePlainForm(t *testing.T) {
	sent := counting.DecideRequest{Reserved: true, Identities: map[string]string{"device": "6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f", "bundle": "com.foo.bar"},
		Candidates: []counting.Candidate{{CID: "42"}, {CID: "43", CRID: "cr-9"}}}
	takesPlainForm(t, sent, decodeDecideFast)
}

// FuzzVerdictsJSON checks the hand-written encoder of a decide's answer
// against encoding/json: the same value back, and the same bytes when no
// string holds anything encoding/json escapes.
func FuzzVerdictsJSON(f *testing.F) {
	f.Add("42", "", true, 0, "", false, "", "", "", 0, 0, int64(0), "", "", int64(0), false, false, int64(0), int64(0), uint8(1))
	f.Add("43", "cr-1", false, 0, "", true, "campaign", "win", "device", 3, 0, int64(2), "", "window_cap", int64(2), false, true, int64(1200), int64(1), uint8(3))
	f.Add("44", "", false, 0, "", true, "advertiser", "click", "", 10, 60, int64(1), "block", "suppressed", int64(1), false, false, int64(0), int64(0), uint8(2))
	f.Add("45", "", true, 10001, "counts unavailable: \"x\" <é>\n", false, "", "", "", 0, 0, int64(0), "", "", int64(0), true, false, int64(0), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, cid, crid string, allowed bool, code int, msg string, capped bool, level, event, dim string, n, gap int,
		limit int64, then, reason string, count int64, degraded, stale bool, age, reserved int64, k uint8) {
		v := counting.Verdict{CID: cid, CRID: crid, Allowed: allowed, Code: code, Msg: msg, Reason: reason, Count: count,
			Degraded: degraded, Stale: stale, AgeMs: age, Reserved: reserved}
		if capped {
			v.Cap = &counting.Cap{Level: level, Event: event, Dim: dim, Window: counting.CapWindow{Unit: "hours", N: n, MinGapSec: gap}, Limit: limit, Then: then}
		}
		vs := make([]counting.Verdict, int(k%4))
		for i := range vs {
			vs[i] = v
			vs[i].Count += int64(i)
		}
		got := appendVerdicts(nil, vs)
		want, err := json.Marshal(counting.DecideResponse{Msg: "ok", Results: vs})
		if err != nil {
			t.Fatal(err)
		}
		var back, wantBack any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &wantBack)
		if !reflect.DeepEqual(back, wantBack) {
			t.Fatalf("decoded %+v, encoding/json's decodes to %+v", back, wantBack)
		}
		escapes := func(s string) bool {
			return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune(`"\<>&`, r) })
		}
		if !escapes(cid+crid+msg+level+event+dim+then+reason) && string(got) != string(want) {
			t.Fatalf("wrote %s, encoding/json writes %s", got, want)
		}
	})
}
