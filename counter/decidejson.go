package main

import (
	"bytes"
	"net/http"
	"strconv"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/jsonscan"
)

// A decide (POST /v1/decide: a bidder's one question per bid request) is
// decoded and answered here without reflection, as the
// batches are (batchjson.go): go-json-experiment's decoding and
// encoding/json's encoding were a fifth of a decide's handler.
// FuzzDecideJSON and FuzzVerdictsJSON check both against the reflecting
// ones.

// decodeDecideFast decodes the plain form of a decide request into req;
// false (req untouched) when b is not plain.
func decodeDecideFast(b []byte, req *counting.DecideRequest) bool {
	d := decoder{Decoder: jsonscan.Decoder{B: b}}
	var r counting.DecideRequest
	ok := d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "reserved":
			return 1 << 0, d.Bool(&r.Reserved)
		case "identities":
			return 1 << 1, d.dims(&r.Identities)
		case "candidates":
			return 1 << 2, d.Array(func() bool {
				if r.Candidates == nil {
					// One '{' a candidate: room for all at once.
					r.Candidates = make([]counting.Candidate, 0, max(1, bytes.Count(d.B, openBrace)))
				}
				r.Candidates = append(r.Candidates, counting.Candidate{})
				return d.candidate(&r.Candidates[len(r.Candidates)-1])
			}, func() { r.Candidates = []counting.Candidate{} })
		}
		return 0, false
	})
	if !ok || !jsonscan.Blank(d.B) {
		return false
	}
	*req = r
	return true
}

// candidate reads one candidate of a decide.
func (d *decoder) candidate(c *counting.Candidate) bool {
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "cid":
			return 1 << 0, d.Str(&c.CID)
		case "crid":
			return 1 << 1, d.Str(&c.CRID)
		}
		return 0, false
	})
}

// writeVerdicts sends a decide's answer, counting.DecideResponse as
// encoding/json writes it.
func writeVerdicts(w http.ResponseWriter, vs []counting.Verdict) {
	writeBuffered(w, func(b []byte) []byte { return appendVerdicts(b, vs) })
}

// appendVerdicts appends {"code":0,"msg":"ok","results":[...]} with vs as
// encoding/json writes counting.Verdict (the same fields, in order, the
// same omissions; a string that needs escaping goes through
// encoding/json).
func appendVerdicts(b []byte, vs []counting.Verdict) []byte {
	b = append(b, `{"code":0,"msg":"ok","results":[`...)
	for i := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendVerdict(b, &vs[i])
	}
	return append(b, "]}"...)
}

func appendVerdict(b []byte, v *counting.Verdict) []byte {
	b = appendJSONString(append(b, `{"cid":`...), v.CID)
	if v.CRID != "" {
		b = appendJSONString(append(b, `,"crid":`...), v.CRID)
	}
	b = strconv.AppendBool(append(b, `,"allowed":`...), v.Allowed)
	b = strconv.AppendInt(append(b, `,"code":`...), int64(v.Code), 10)
	if v.Msg != "" {
		b = appendJSONString(append(b, `,"msg":`...), v.Msg)
	}
	if c := v.Cap; c != nil {
		b = appendJSONString(append(b, `,"cap":{"level":`...), c.Level)
		b = appendJSONString(append(b, `,"event":`...), c.Event)
		if c.Dim != "" {
			b = appendJSONString(append(b, `,"dim":`...), c.Dim)
		}
		b = appendJSONString(append(b, `,"window":{"unit":`...), c.Window.Unit)
		b = strconv.AppendInt(append(b, `,"n":`...), int64(c.Window.N), 10)
		if c.Window.MinGapSec != 0 {
			b = strconv.AppendInt(append(b, `,"minGapSec":`...), int64(c.Window.MinGapSec), 10)
		}
		b = strconv.AppendInt(append(b, `},"limit":`...), c.Limit, 10)
		if c.Then != "" {
			b = appendJSONString(append(b, `,"then":`...), c.Then)
		}
		b = append(b, '}')
	}
	if v.Reason != "" {
		b = appendJSONString(append(b, `,"reason":`...), v.Reason)
	}
	if v.Count != 0 {
		b = strconv.AppendInt(append(b, `,"count":`...), v.Count, 10)
	}
	if v.Degraded {
		b = append(b, `,"degraded":true`...)
	}
	if v.Stale {
		b = append(b, `,"stale":true`...)
	}
	if v.AgeMs != 0 {
		b = strconv.AppendInt(append(b, `,"ageMs":`...), v.AgeMs, 10)
	}
	if v.Reserved != 0 {
		b = strconv.AppendInt(append(b, `,"reserved":`...), v.Reserved, 10)
	}
	return append(b, '}')
}
