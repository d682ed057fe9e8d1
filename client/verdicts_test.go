package client

import (
	"net/http"
	"reflect"
	"testing"
	"unsafe"

	"github.com/freqcap/freqcap/shared/counting"
)

// verdictCands are the candidates FuzzVerdictAnswers reads verdicts of.
var verdictCands = []counting.Candidate{{CID: "a"}, {CID: "b", CRID: "b-300x250"}, {CID: "c"}}

// FuzzVerdictAnswers checks that verdicts read in their plain form
// (verdictAnswers) are the ones the full decoder reads.
func FuzzVerdictAnswers(f *testing.F) {
	for _, s := range []string{
		// As the counter writes them.
		`{"code":0,"msg":"ok","results":[{"cid":"a","allowed":true,"code":0},` +
			`{"cid":"b","crid":"b-300x250","allowed":false,"code":0,"cap":{"level":"campaign","event":"win","dim":"device","window":{"unit":"hours","n":3},"limit":2},"reason":"window_cap","count":2,"stale":true,"ageMs":40,"reserved":1},` +
			`{"cid":"c","allowed":true,"code":10002,"msg":"campaign c declares no caps"}]}`,
		`{"code":0,"msg":"ok","results":[{"cid":"a","allowed":false,"code":0,"cap":{"level":"advertiser","event":"click","window":{"unit":"minutes","n":10,"minGapSec":60},"limit":1,"then":"block"},"reason":"suppressed","count":1},` +
			`{"cid":"b","allowed":true,"code":10001,"msg":"redis too slow","degraded":true},{"cid":"x","allowed":false,"code":0,"reason":"no_identity"}]}`,
		// Not plain: the full decoder's.
		`{"code":0,"msg":"ok","results":[{"cid":"a","allowed":null}]}`,
		`{"code":0,"msg":"ok","results":[{"cid":"a","count":-1}]}`,
		`{"code":0,"msg":"ok","results":[{"cid":"a","cid":"b"}]}`,
		`{"code":0,"msg":"ok","results":[{"CID":"a"}]}`,
		`{"code":0,"msg":"\u00e9","results":[]}`,
		`{"code":0,"results":[{"cid":"a","reason":"pace_gap"},{},{},{}]} `,
		`{"code":10003,"msg":"candidates[0].cid must be 1-128 bytes"}`,
		`{"code":0,"msg":"ok"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := verdictAnswers([]byte(body), verdictCands)
		if !ok {
			return
		}
		want, err := decodeResults[counting.Verdict](http.StatusOK, []byte(body))
		if err != nil {
			t.Fatalf("read in its plain form, refused by the full decoder: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("plain %+v\nfull  %+v", got, want)
		}
	})
}

// The counter's answers are read in their plain form: every member in
// its verdict's place, the candidates' own strings shared.
func TestVerdictAnswersTakeThePlainForm(t *testing.T) {
	body := `{"code":0,"msg":"ok","results":[{"cid":"a","allowed":true,"code":0},` +
		`{"cid":"b","crid":"b-300x250","allowed":false,"code":0,"cap":{"level":"campaign","event":"win","dim":"device","window":{"unit":"hours","n":3},"limit":2},"reason":"window_cap","count":2,"stale":true,"ageMs":40,"reserved":1},` +
		`{"cid":"c","allowed":true,"code":10001,"msg":"redis too slow","degraded":true}]}`
	got, ok := verdictAnswers([]byte(body), verdictCands)
	if !ok {
		t.Fatal("the counter's answer was not read in its plain form")
	}
	want := []counting.Verdict{
		{CID: "a", Allowed: true},
		{CID: "b", CRID: "b-300x250", Cap: &counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 3}, Limit: 2},
			Reason: "window_cap", Count: 2, Stale: true, AgeMs: 40, Reserved: 1},
		{CID: "c", Allowed: true, Code: 10001, Msg: "redis too slow", Degraded: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if unsafe.StringData(got[1].CID) != unsafe.StringData(verdictCands[1].CID) || unsafe.StringData(got[1].CRID) != unsafe.StringData(verdictCands[1].CRID) {
		t.Error("a verdict's campaign and creative are copies of its candidate's")
	}
	if unsafe.StringData(got[1].Reason) != unsafe.StringData(string(WindowCap)) {
		t.Error("a verdict's reason is a copy")
	}
}

// FuzzDecideBody checks that the request DecideIDs writes by hand is the
// one go-json encodes.
func FuzzDecideBody(f *testing.F) {
	f.Add("device", "6f1c2a9e", "42", "", "b", "cr-1", true)
	f.Add("bun\"dle", "com.é", "c\\1", "\x00", "", "", false)
	f.Fuzz(func(t *testing.T, dim, id, cid1, crid1, cid2, crid2 string, reserved bool) {
		for _, req := range []counting.DecideRequest{
			{Reserved: reserved, Identities: map[string]string{dim: id, "bundle": "com.b"},
				Candidates: []counting.Candidate{{CID: cid1, CRID: crid1}, {CID: cid2, CRID: crid2}}},
			{Identities: map[string]string{}, Candidates: []counting.Candidate{}},
			{},
		} {
			sameRequest(t, appendDecideBody(nil, &req), req)
		}
	})
}
