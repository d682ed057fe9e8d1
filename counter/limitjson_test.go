package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/freqcap/freqcap/shared/counting"
)

// FuzzLimitJSON: a check the fast path decodes is the one
// httpjson.Unmarshal decodes from the same bytes, and one it refuses the
// fast path leaves to it.
func FuzzLimitJSON(f *testing.F) {
	for _, seed := range []string{
		`{"key":"user:1","algorithm":"gcra","limit":100,"period":"1m","burst":10}`,
		`{"key":"user:1","policy":"api","cost":0,"mode":"shadow"}`,
		`{"key":"k","limits":[{"algorithm":"token_bucket","limit":5,"period":"1s","burst":20,"acquire":true},{"algorithm":"leaky_bucket","limit":1,"period":"1m","capacity":3}]}`,
		` { "key" : "a b" , "limits" : [ ] , "cost" : 7 } `,
		`{"key":"k","limits":null}`,
		`{"key":"k","cost":null}`,
		`{"key":"k","cost":-1}`,
		`{"key":"k","cost":1.5}`,
		`{"key":"k","cost":01}`,
		`{"key":"k","limit":99999999999999999999}`,
		`{"key":"k","key":"j"}`,
		`{"key":"k","limits":[{"limit":1,"limit":2}]}`,
		`{"key":"k","limits":[{"key":"x"}]}`,
		`{"key":"k\u0041"}`,
		"{\"key\":\"\xff\"}",
		`{"Key":"k"}`,
		`{"key":"k","other":1}`,
		`{"key":"k","acquire":tru}`,
		`{"key":"k"} x`,
		`{"key":"k"}{}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) { fastAgrees(t, b, decodeLimitFast) })
}

// TestLimitJSONTakesThePlainForm: a check as encoding/json (and so the
// client's Limiter) writes it goes the fast way and decodes to what was
// sent.
func TestLimitJSONTakesThePlainForm(t *testing.T) {
	zero := int64(0)
	for _, sent := range []counting.LimitRequest{
		{Key: "user:1", Rule: counting.Rule{Algorithm: counting.GCRA, Limit: 100, Period: "1m", Burst: 10}},
		{Key: "user:1", Policy: "api", Cost: &zero, Mode: counting.Shadow},
		{Key: "user 2", Limits: []counting.Rule{{Algorithm: counting.TokenBucket, Limit: 5, Period: "1s", Acquire: true}, {Algorithm: counting.LeakyBucket, Limit: 1, Period: "1m", Capacity: 3}}},
	} {
		b, err := json.Marshal(sent)
		if err != nil {
			t.Fatal(err)
		}
		var got counting.LimitRequest
		if !decodeLimitFast(b, &got) {
			t.Fatalf("%s went the slow way", b)
		}
		if !reflect.DeepEqual(got, sent) {
			t.Errorf("decoded %+v, sent %+v", got, sent)
		}
	}
}
