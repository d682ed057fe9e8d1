package client

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
)

// answerCaps are the caps FuzzCapAnswers reads answers of: windows out of
// order and one twice, an exact window, a cap without windows.
var answerCaps = []Candidate{
	{CID: "a", Caps: []Cap{
		{Dim: "device", Day: 3, Windows: []Window{{Hours: 24, Limit: 5}, {Hours: 3, Limit: 2}, {Hours: 24, Limit: 1}}, Pace: &Pace{Window: time.Hour, Limit: 2}},
		{Dim: "bundle", Day: 100},
	}},
	{CID: "b", Event: "imp", Caps: []Cap{{Dim: "device", Windows: []Window{{Hours: 3, Limit: 1}}}}},
}

// FuzzCapAnswers checks that an answer read in its plain form (capAnswers)
// gives the caps the counts the full decoder gives them.
func FuzzCapAnswers(f *testing.F) {
	for _, s := range []string{
		// As the counter writes it.
		`{"code":0,"results":[{"code":0,"cid":"a","event":"win","windowHours":[3,24],"paceWindowSec":3600,"counts":{"device":{"day":2,"windows":{"3":1,"24":4},"pace":{"count":1,"lastAt":1796611934182}}}},` +
			`{"code":0,"cid":"a","event":"win","windowHours":[],"counts":{"bundle":{"day":7}}},{"code":0,"cid":"b","event":"imp","windowHours":[3],"counts":{"device":{"day":0,"windows":{"3":0}}}}]}`,
		// Degraded, stale, failed.
		`{"code":0,"results":[{"code":10001,"msg":"redis too slow","cid":"a","event":"win","windowHours":[3,24],"paceWindowSec":3600,"counts":{"device":{"day":0,"windows":{"3":0,"24":0},"pace":{"count":0,"lastAt":0}}},"degraded":true},` +
			`{"code":0,"cid":"a","event":"win","windowHours":[],"counts":{"bundle":{"day":7}},"stale":true,"ageMs":120},{"code":0,"cid":"b","event":"imp","windowHours":[3],"counts":{"device":{"day":1,"windows":{"3":1}}}}]}`,
		// Not plain, or not these caps' answer: the full decoder's.
		`{"code":0,"results":[{"code":0,"cid":"a","counts":{"device":{"day":2,"windows":{"3":1,"3":2}}}},{"counts":{"bundle":{"day":1}}},{"counts":{"device":{"day":1}}}]}`,
		`{"code":0,"results":[{"counts":{"device":{"day":null}}},{},{}]}`,
		`{"code":0,"results":[{"counts":{"device":{"day":-1}}},{},{}]}`,
		`{"code":0,"results":[{"counts":{"tagid":{"day":1}}},{},{}]}`,
		`{"code":0,"results":[{},{}]}`,
		`{"code":10003,"msg":"items[0].dims.device must be 1-128 bytes"}`,
		`{"code":0,"msg":"\u00e9","results":[{},{},{}]}`,
		`{"Code":0,"results":[{},{},{}]}`,
		`{"code":0,"results":[{"counts":{"device":{"pace":{"count":2}}}},{},{}]} `,
		`{"code":0,"results":[{"counts":{"device":{"periods":{"day:3":2},"week":1,"month":2,"lifetime":3}}},{"duplicate":false,"level":"advertiser"},{}]}`,
	} {
		f.Add(s)
	}
	refs := capRefs(Identities{"device": "d", "bundle": "b"}, answerCaps)
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := capAnswers([]byte(body), answerCaps, refs)
		if !ok {
			return
		}
		answers, err := decodeResults[counting.Answer](http.StatusOK, []byte(body))
		if err != nil {
			t.Fatalf("read in its plain form, refused by the full decoder: %v", err)
		}
		want, err := countedOf(answers, answerCaps, refs)
		if err != nil {
			t.Fatalf("read in its plain form, refused by the full decoder: %v", err)
		}
		for k := range want {
			w, g := want[k], got[k]
			if w.pace != nil && g.pace != nil && *w.pace == *g.pace {
				w.pace, g.pace = nil, nil
			}
			w.paceOf, g.paceOf = counting.Pace{}, counting.Pace{} // only through pace
			if !reflect.DeepEqual(w, g) {
				t.Fatalf("result %d:\nplain %+v\nfull  %+v", k, g, w)
			}
		}
	})
}

// The answers the counter writes are read in their plain form, with every
// count in its cap's place.
func TestCapAnswersTakeThePlainForm(t *testing.T) {
	refs := capRefs(Identities{"device": "d", "bundle": "b"}, answerCaps)
	body := `{"code":0,"results":[{"code":0,"cid":"a","event":"win","windowHours":[3,24],"paceWindowSec":3600,"counts":{"device":{"day":2,"windows":{"3":1,"24":4},"pace":{"count":1,"lastAt":1796611934182}}}},` +
		`{"code":0,"cid":"a","event":"win","windowHours":[],"counts":{"bundle":{"day":7}},"stale":true,"ageMs":120},` +
		`{"code":10001,"msg":"redis too slow","cid":"b","event":"imp","windowHours":[3],"counts":{"device":{"day":0,"windows":{"3":0}}},"degraded":true}]}`
	got, ok := capAnswers([]byte(body), answerCaps, refs)
	if !ok {
		t.Fatal("the counter's answer was not read in its plain form")
	}
	want := []counted{
		{day: 2, windows: []int64{4, 1, 4}, pace: &counting.Pace{Count: 1, LastAt: 1796611934182}},
		{day: 7, windows: []int64{}, stale: true, ageMs: 120},
		{failed: true, windows: []int64{0}},
	}
	for k := range want {
		g := got[k]
		if (g.pace == nil) != (want[k].pace == nil) || g.pace != nil && *g.pace != *want[k].pace {
			t.Errorf("result %d: pace %+v, want %+v", k, g.pace, want[k].pace)
		}
		g.pace, g.paceOf = want[k].pace, counting.Pace{}
		if !reflect.DeepEqual(g, want[k]) {
			t.Errorf("result %d:\n got %+v\nwant %+v", k, g, want[k])
		}
	}
}

// FuzzCapBody checks that the batch read Decide writes by hand is the
// batch of its caps' items (capItem) as the JSON encoder writes it.
func FuzzCapBody(f *testing.F) {
	f.Add("42", "", "device", "6f1c2a9e", 3, 24, 3600)
	f.Add("c\"1", "imp", "bundle", "com.é", 0, 0, 0)
	f.Add("a<b>&", "win", "tag\x00id", "\u2028", -1, 168, -5)
	f.Fuzz(func(t *testing.T, cid, event, dim, id string, h1, h2, pace int) {
		cands := []Candidate{
			{CID: cid, Event: event, Caps: []Cap{{Dim: dim, Windows: []Window{{Hours: h1}, {Hours: h2}}, Pace: &Pace{Window: time.Duration(pace) * time.Second}}, {Dim: "bundle"}}},
			{CID: "x", Caps: []Cap{{Dim: dim, Windows: []Window{{Hours: h2}}}}},
		}
		ids := Identities{dim: id, "bundle": "com.b"}
		refs := capRefs(ids, cands)
		items := counting.BatchRequest{Items: []counting.BatchItem{}}
		for _, r := range refs {
			items.Items = append(items.Items, capItem(ids, &cands[r.cand], &cands[r.cand].Caps[r.cap]))
		}
		sameRequest(t, appendCapBody(nil, ids, cands, refs), items)
	})
}

// sameRequest checks that body, a request written by hand, decodes to
// the value want encodes to.
func sameRequest[T any](t *testing.T, body []byte, want T) {
	t.Helper()
	encoded, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got, wantReq T
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if err := json.Unmarshal(encoded, &wantReq); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantReq) {
		t.Fatalf("by hand %s\nencoded %s", body, encoded)
	}
}
