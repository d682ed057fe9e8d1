package main

import (
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/jsonscan"
)

// The body of POST /v1/limit (one rate-limit check) is decoded here in its
// plain form, as batchjson.go decodes the batches: go-json-experiment's
// reflection was about a seventh of the handler's instructions (callgrind's
// profile of BenchmarkLimitHandler). Anything not plain goes to httpjson.Unmarshal,
// which decodes it or says what is wrong; FuzzLimitJSON checks the two
// agree.

// decodeLimitFast decodes the plain form of a check into req; false (req
// untouched) when b is not plain.
func decodeLimitFast(b []byte, req *counting.LimitRequest) bool {
	d := decoder{Decoder: jsonscan.Decoder{B: b}}
	var r counting.LimitRequest
	ok := d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "key":
			return 1 << 0, d.Str(&r.Key)
		case "policy":
			return 1 << 1, d.Str(&r.Policy)
		case "limits":
			return 1 << 2, d.Array(func() bool {
				r.Limits = append(r.Limits, counting.Rule{})
				return d.rule(&r.Limits[len(r.Limits)-1])
			}, func() { r.Limits = []counting.Rule{} })
		case "cost":
			r.Cost = new(int64)
			return 1 << 3, d.Int64(r.Cost)
		case "mode":
			return 1 << 4, d.Str(&r.Mode)
		}
		return d.ruleMember(name, &r.Rule, 5)
	})
	if !ok || !jsonscan.Blank(d.B) {
		return false
	}
	*req = r
	return true
}

// rule reads one limit of a check's limits.
func (d *decoder) rule(r *counting.Rule) bool {
	return d.Members(func(name []byte) (uint32, bool) { return d.ruleMember(name, r, 0) })
}

// ruleMember reads a member of a Rule (its bits from 1<<shift on): a
// limit of limits, or the one a check names inline.
func (d *decoder) ruleMember(name []byte, r *counting.Rule, shift uint) (uint32, bool) {
	switch string(name) {
	case "algorithm":
		var s string
		ok := d.Str(&s)
		r.Algorithm = counting.Kind(s)
		return 1 << shift, ok
	case "limit":
		return 1 << (shift + 1), d.Int64(&r.Limit)
	case "period":
		return 1 << (shift + 2), d.Str(&r.Period)
	case "burst":
		return 1 << (shift + 3), d.Int64(&r.Burst)
	case "capacity":
		return 1 << (shift + 4), d.Int64(&r.Capacity)
	case "acquire":
		return 1 << (shift + 5), d.Bool(&r.Acquire)
	}
	return 0, false
}
