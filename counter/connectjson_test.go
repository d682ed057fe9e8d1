package main

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
)

// FuzzConnectJSON: a request the fast path decodes is the one protojson
// decodes from the same bytes, and an answer the fast path encodes is
// valid JSON that protojson decodes to the same message.
func FuzzConnectJSON(f *testing.F) {
	for _, seed := range []string{
		`{"business_id":7,"key":"user:1","time_span":86400}`,
		`{"businessId":7,"key":"user:1","timeSpan":1,"timeUnit":"TIME_UNIT_DAY","eventId":"e-1"}`,
		` { "business_id" : 4294967295 , "key" : "k" } `,
		`{"business_id":7,"businessId":8}`,
		`{"business_id":07}`,
		`{"business_id":"7"}`,
		`{"business_id":1e2}`,
		`{"key":"a\"b"}`,
		`{"key":null}`,
		`{"key":"ü"}`,
		`{}`,
		`{"time_unit":1}`,
		`{"other":1}`,
		`{"key":"a",}`,
	} {
		f.Add([]byte(seed), int32(0), "ok", "user:1", uint32(3), true, int64(12))
	}
	f.Fuzz(func(t *testing.T, b []byte, code int32, msg, key string, n uint32, stale bool, age int64) {
		for _, pair := range [][2]proto.Message{{&freqcapv1.AddFreqReq{}, &freqcapv1.AddFreqReq{}}, {&freqcapv1.GetFreqReq{}, &freqcapv1.GetFreqReq{}}} {
			fast, slow := pair[0], pair[1]
			if !unmarshalFast(b, fast) {
				continue
			}
			if err := protojson.Unmarshal(b, slow); err != nil {
				t.Fatalf("%q: the fast path decoded %v, protojson refuses it: %v", b, fast, err)
			}
			if !proto.Equal(fast, slow) {
				t.Fatalf("%q: fast %v, protojson %v", b, fast, slow)
			}
		}
		for _, m := range []proto.Message{
			&freqcapv1.AddFreqRsp{Code: code, Msg: msg, BusinessId: n, Key: key, Freq: n / 2, Ttl: n / 3},
			&freqcapv1.GetFreqRsp{Code: code, Msg: msg, BusinessId: n, Key: key, Freq: n / 2, Ttl: n / 3, Stale: stale, AgeMs: age},
			&freqcapv1.BatchGetFreqRsp{Code: code, Msg: msg, Results: []*freqcapv1.GetFreqRsp{{Key: key, AgeMs: age}, {Msg: msg}}},
			&freqcapv1.BatchAddFreqRsp{Code: code, Msg: msg},
		} {
			out, ok := marshalFast(m)
			if !ok {
				if _, err := protojson.Marshal(m); err == nil {
					t.Fatalf("%T: not encoded by the fast path, but protojson encodes %v", m, m)
				}
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%T: %s is not JSON", m, out)
			}
			back := m.ProtoReflect().New().Interface()
			if err := protojson.Unmarshal(out, back); err != nil {
				t.Fatalf("%T: protojson cannot read %s: %v", m, out, err)
			}
			if !proto.Equal(m, back) {
				t.Fatalf("%T: wrote %s, read back %v, want %v", m, out, back, m)
			}
		}
	})
}

// TestConnectJSONTakesThePlainForm: the requests bidders send go the fast
// way, and the codec answers them as protojson would.
func TestConnectJSONTakesThePlainForm(t *testing.T) {
	var add freqcapv1.AddFreqReq
	if !unmarshalFast([]byte(`{"business_id":7,"key":"user:1","time_span":1,"time_unit":"TIME_UNIT_DAY","event_id":"e-1"}`), &add) {
		t.Fatal("a plain AddFreqReq went to protojson")
	}
	if add.BusinessId != 7 || add.Key != "user:1" || add.TimeSpan != 1 || add.TimeUnit != freqcapv1.TimeUnit_TIME_UNIT_DAY || add.EventId != "e-1" {
		t.Errorf("decoded %v", &add)
	}
	var codec protoJSON
	var get freqcapv1.GetFreqReq
	if err := codec.Unmarshal([]byte(`{"business_id":"7","key":"k"}`), &get); err != nil || get.BusinessId != 7 {
		t.Errorf("a number as a string (protojson's form) = %v, %v", &get, err)
	}
	if err := codec.Unmarshal([]byte(`{"business_id":7,"kee":"k"}`), &get); err == nil {
		t.Error("an unknown field was accepted")
	}
}
