package main

import (
	"encoding/json"
	"reflect"
	"testing"

	gojson "github.com/goccy/go-json"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// FuzzBatchJSON: a batch the fast path decodes is the one
// httpjson.Unmarshal decodes from the same bytes, and one it refuses the
// fast path leaves to it.
func FuzzBatchJSON(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"cid":"42","dims":{"device":"d-1","tagid":"t"},"windowHours":[3,24],"eid":"e-1","release":true}],"quiet":true}`,
		`{"items":[{"cid":"42","level":"advertiser","event":"imp","dims":{"bundle":"b"},"paceWindowSec":600,"week":true,"month":false,"zone":"Asia/Shanghai","lifetimeEnd":1893456000,"periods":[{"unit":"day","n":3}],"lost":false}]}`,
		`{"items":[{"cid":"42","dims":{"device":"d"},"levels":[{"level":"advertiser","id":"a1","dims":["device"],"windowHours":[1],"paceWindowSec":60,"week":true,"month":true,"zone":"UTC","lifetimeEnd":7,"periods":[{"unit":"week","n":2}],"lost":true}]}]}`,
		` { "items" : [ { "cid" : "1" , "dims" : { } , "windowHours" : [ ] , "levels" : [ ] , "periods" : [ ] } ] , "quiet" : false } `,
		`{"items":[]}`,
		`{"items":null}`,
		`{"items":[{"cid":null}]}`,
		`{"items":[{"cid":"1","cid":"2"}]}`,
		`{"items":[{"cid":"1","dims":{"device":"a","device":"b"}}]}`,
		`{"items":[{"cid":"1","dims":{"device":"a\u0041"}}]}`,
		`{"items":[{"cid":"1","windowHours":[-1]}]}`,
		`{"items":[{"cid":"1","windowHours":[1.5]}]}`,
		`{"items":[{"cid":"1","windowHours":[1e2]}]}`,
		`{"items":[{"cid":"1","windowHours":[01]}]}`,
		`{"items":[{"cid":"1","paceWindowSec":99999999999999999999}]}`,
		`{"items":[{"cid":"ü","dims":{"dévice":"x"}}]}`,
		"{\"items\":[{\"cid\":\"\xff\"}]}",
		"{\"items\":[{\"cid\":\"1\",\"dims\":{\"\xff\":\"x\"}}]}",
		`{"items":[{"CID":"1"}]}`,
		`{"items":[{"cid":"1","other":1}]}`,
		`{"items":[{"cid":"1"},]}`,
		`{"items":[{"cid":"1"}]} x`,
		`{"items":[{"cid":"1"}]}{}`,
		`{"items":[{"cid":"1","week":tru}]}`,
		`{"items":[{"cid":"1","release":truex}]}`,
		`{"quiet":true,"quiet":false}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) { fastAgrees(t, b, decodeBatchFast) })
}

// fastAgrees fails t when decode, a plain-form fast path, decodes b into
// other than what httpjson.Unmarshal decodes from it, or decodes what
// httpjson.Unmarshal refuses.
func fastAgrees[T any](t *testing.T, b []byte, decode func([]byte, *T) bool) {
	var fast T
	if !decode(b, &fast) {
		return
	}
	var slow T
	if err := httpjson.Unmarshal(b, &slow, "fuzzed"); err != nil {
		t.Fatalf("%q: the fast path decoded %+v, httpjson refuses it: %v", b, fast, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, slow)
	}
}

// TestBatchJSONTakesThePlainForm: the batches callback forwards and the
// client's Decide sends go the fast way, and decode to what was sent.
func TestBatchJSONTakesThePlainForm(t *testing.T) {
	sent := counting.BatchRequest{Quiet: true, Items: []counting.BatchItem{
		{CID: "42", Event: "win", Dims: map[string]string{"device": "6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f", "tagid": "1234"},
			WindowHours: []int{3}, EID: "bid-1", Release: true,
			Levels: []counting.LevelCount{{Level: "advertiser", ID: "a1", Dims: []string{"device"}, WindowHours: []int{24},
				Week: true, Zone: "America/New_York", Periods: []counting.Period{{Unit: "day", N: 7}}}}},
		{CID: "43", Dims: map[string]string{"bundle": "com.foo.bar"}, PaceWindowSec: 600, Month: true, LifetimeEnd: 1893456000, Lost: true},
	}}
	takesPlainForm(t, sent, decodeBatchFast)
}

// takesPlainForm fails t unless sent, as encoding/json and goccy/go-json
// (callback's and the client's codec) write it, goes decode's fast way and
// decodes to sent.
func takesPlainForm[T any](t *testing.T, sent T, decode func([]byte, *T) bool) {
	t.Helper()
	for name, marshal := range map[string]func(any) ([]byte, error){"encoding/json": json.Marshal, "goccy/go-json": gojson.Marshal} {
		b, err := marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		var got T
		if !decode(b, &got) {
			t.Fatalf("%s: %s went the slow way", name, b)
		}
		if !reflect.DeepEqual(got, sent) {
			t.Errorf("%s: decoded %+v, sent %+v", name, got, sent)
		}
	}
}
