package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/shared/jsonscan"
)

// The frequency-control calls every caller makes, AddFreq and GetFreq
// (alone or in batches), are encoded and decoded here without protojson's
// reflection, which took 14% of the counter's CPU on AddFreq. What is
// written is what protojson writes with UseProtoNames and EmitUnpopulated
// (int64 as a string); what is read is only the plain form of a request:
// an object of known fields, each once, with plain unsigned numbers,
// strings without escapes and enum names. Anything else (camelCase names
// excepted, which are known fields too) goes to protojson, which decodes
// it or says what is wrong, as before. FuzzConnectJSON checks both
// against protojson.

// marshalFast encodes the answers of the frequency-control calls; false
// for any other message, and for strings that are not UTF-8 (protojson
// refuses them).
func marshalFast(v any) ([]byte, bool) {
	if !validStrings(v) {
		return nil, false
	}
	switch m := v.(type) {
	case *freqcapv1.AddFreqRsp:
		return appendAddRsp(make([]byte, 0, 96), m), true
	case *freqcapv1.GetFreqRsp:
		return appendGetRsp(make([]byte, 0, 128), m), true
	case *freqcapv1.BatchAddFreqRsp:
		return appendBatch(make([]byte, 0, 64+96*len(m.Results)), m.Results, appendAddRsp, m.Code, m.Msg), true
	case *freqcapv1.BatchGetFreqRsp:
		return appendBatch(make([]byte, 0, 64+128*len(m.Results)), m.Results, appendGetRsp, m.Code, m.Msg), true
	}
	return nil, false
}

// validStrings reports whether every string of an answer is UTF-8.
func validStrings(v any) bool {
	switch m := v.(type) {
	case *freqcapv1.AddFreqRsp:
		return utf8.ValidString(m.GetMsg()) && utf8.ValidString(m.GetKey())
	case *freqcapv1.GetFreqRsp:
		return utf8.ValidString(m.GetMsg()) && utf8.ValidString(m.GetKey())
	case *freqcapv1.BatchAddFreqRsp:
		return allValid(m.Results) && utf8.ValidString(m.Msg)
	case *freqcapv1.BatchGetFreqRsp:
		return allValid(m.Results) && utf8.ValidString(m.Msg)
	}
	return true
}

// allValid is validStrings of every answer of a batch.
func allValid[T any](rs []T) bool {
	for _, r := range rs {
		if !validStrings(r) {
			return false
		}
	}
	return true
}

// appendBatch appends a batch answer: its results, then its code and msg.
func appendBatch[T any](b []byte, rs []T, each func([]byte, T) []byte, code int32, msg string) []byte {
	b = append(b, `{"results":[`...)
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, r)
	}
	b = strconv.AppendInt(append(b, `],"code":`...), int64(code), 10)
	return append(appendJSONString(append(b, `,"msg":`...), msg), '}')
}

// appendFreqFields appends the members AddFreqRsp and GetFreqRsp share,
// from the opening brace on.
func appendFreqFields(b []byte, code int32, msg string, business uint32, key string, freq, ttl uint32) []byte {
	b = strconv.AppendInt(append(b, `{"code":`...), int64(code), 10)
	b = appendJSONString(append(b, `,"msg":`...), msg)
	b = strconv.AppendUint(append(b, `,"business_id":`...), uint64(business), 10)
	b = appendJSONString(append(b, `,"key":`...), key)
	b = strconv.AppendUint(append(b, `,"freq":`...), uint64(freq), 10)
	return strconv.AppendUint(append(b, `,"ttl":`...), uint64(ttl), 10)
}

func appendAddRsp(b []byte, m *freqcapv1.AddFreqRsp) []byte {
	b = appendFreqFields(b, m.GetCode(), m.GetMsg(), m.GetBusinessId(), m.GetKey(), m.GetFreq(), m.GetTtl())
	return append(b, '}')
}

func appendGetRsp(b []byte, m *freqcapv1.GetFreqRsp) []byte {
	b = appendFreqFields(b, m.GetCode(), m.GetMsg(), m.GetBusinessId(), m.GetKey(), m.GetFreq(), m.GetTtl())
	b = strconv.AppendBool(append(b, `,"stale":`...), m.GetStale())
	b = strconv.AppendInt(append(b, `,"age_ms":"`...), m.GetAgeMs(), 10) // int64: a string
	return append(b, `"}`...)
}

// appendJSONString appends s as a JSON string: as it is when it needs no
// escaping, else as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// unmarshalFast decodes the plain form of a frequency-control request into
// v; false (v untouched) when v is another message or b is not plain.
func unmarshalFast(b []byte, v any) bool {
	switch m := v.(type) {
	case *freqcapv1.AddFreqReq:
		var r freqcapv1.AddFreqReq
		if rest, ok := readObject(b, func(name string, d *decoder) bool { return readAddField(&r, name, d) }); ok && jsonscan.Blank(rest) {
			m.BusinessId, m.Key, m.TimeSpan, m.TimeUnit, m.EventId = r.BusinessId, r.Key, r.TimeSpan, r.TimeUnit, r.EventId
			return true
		}
	case *freqcapv1.GetFreqReq:
		var r freqcapv1.GetFreqReq
		if rest, ok := readObject(b, func(name string, d *decoder) bool { return readGetField(&r, name, d) }); ok && jsonscan.Blank(rest) {
			m.BusinessId, m.Key = r.BusinessId, r.Key
			return true
		}
	}
	return false
}

// readAddField reads one member of an AddFreqReq.
func readAddField(r *freqcapv1.AddFreqReq, name string, d *decoder) bool {
	switch name {
	case "business_id", "businessId":
		return d.Uint32(&r.BusinessId)
	case "key":
		return d.Str(&r.Key)
	case "time_span", "timeSpan":
		return d.Uint32(&r.TimeSpan)
	case "time_unit", "timeUnit":
		var s string
		if !d.Str(&s) {
			return false
		}
		u, ok := freqcapv1.TimeUnit_value[s]
		r.TimeUnit = freqcapv1.TimeUnit(u)
		return ok
	case "event_id", "eventId":
		return d.Str(&r.EventId)
	}
	return false
}

// readGetField reads one member of a GetFreqReq.
func readGetField(r *freqcapv1.GetFreqReq, name string, d *decoder) bool {
	switch name {
	case "business_id", "businessId":
		return d.Uint32(&r.BusinessId)
	case "key":
		return d.Str(&r.Key)
	}
	return false
}

// decoder reads plain JSON values (jsonscan.Decoder), with the names of
// the dimensions read so far (batchjson.go).
type decoder struct {
	jsonscan.Decoder
	names []string
}

// readObject reads one object whose members field reads, each field at
// most once under either of its names (business_id, businessId): a
// repeated member is not plain, and protojson says what is wrong with it.
// It returns what follows the object.
func readObject(b []byte, field func(name string, d *decoder) bool) ([]byte, bool) {
	d := &decoder{Decoder: jsonscan.Decoder{B: b}}
	d.SkipSpace()
	if len(d.B) == 0 || d.B[0] != '{' {
		return nil, false
	}
	d.B = d.B[1:]
	var seen []string // the fields so far, by their JSON names
	for first := true; ; first = false {
		d.SkipSpace()
		if len(d.B) > 0 && d.B[0] == '}' && first {
			return d.B[1:], true
		}
		var name string
		if !d.Str(&name) {
			return nil, false
		}
		jsonName := camel(name)
		if slices.Contains(seen, jsonName) {
			return nil, false
		}
		seen = append(seen, jsonName)
		d.SkipSpace()
		if len(d.B) == 0 || d.B[0] != ':' {
			return nil, false
		}
		d.B = d.B[1:]
		if !field(name, d) {
			return nil, false
		}
		d.SkipSpace()
		if len(d.B) == 0 {
			return nil, false
		}
		switch d.B[0] {
		case ',':
			d.B = d.B[1:]
		case '}':
			return d.B[1:], true
		default:
			return nil, false
		}
	}
}

// camel is a proto name's JSON name (business_id: businessId); a name
// without '_' is its own.
func camel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	out := make([]byte, 0, len(s))
	up := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_':
			up = true
		case up && c >= 'a' && c <= 'z':
			out, up = append(out, c-'a'+'A'), false
		default:
			out, up = append(out, c), false
		}
	}
	return string(out)
}
