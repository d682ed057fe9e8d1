package client

import (
	"unicode/utf8"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/jsonscan"
)

// DecideIDs over HTTP (POST /v1/decide) writes its request by hand and
// reads the counter's verdicts in place, as Decide does its batch read
// (answers.go): go-json's encoding of the request and reflection over the
// answer were a fifth of a bidder's CPU per call. An answer in any other
// form (an escape, null, a sign, a member a verdict does not have) goes
// to the full decoder. FuzzDecideBody and FuzzVerdictAnswers check both
// against go-json.

// appendDecideBody appends req as go-json encodes a
// counting.DecideRequest (members in any order).
func appendDecideBody(b []byte, req *counting.DecideRequest) []byte {
	if b == nil {
		b = make([]byte, 0, 64+32*len(req.Identities)+48*len(req.Candidates))
	}
	b = append(b, '{')
	if req.Reserved {
		b = append(b, `"reserved":true,`...)
	}
	b = append(b, `"identities":`...)
	if req.Identities == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '{')
		first := true
		for dim, id := range req.Identities {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendString(append(appendString(b, dim), ':'), id)
		}
		b = append(b, '}')
	}
	b = append(b, `,"candidates":`...)
	if req.Candidates == nil {
		return append(b, "null}"...)
	}
	b = append(b, '[')
	for i := range req.Candidates {
		c := &req.Candidates[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"cid":`...), c.CID)
		if c.CRID != "" {
			b = appendString(append(b, `,"crid":`...), c.CRID)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// verdictAnswers reads body, the counter's answer to a decide of cands,
// into its verdicts; false when it is not in the plain form or not a
// successful answer. A verdict's campaign and creative that are the
// candidate's in its place share its strings.
func verdictAnswers(body []byte, cands []counting.Candidate) ([]counting.Verdict, bool) {
	d := jsonscan.Decoder{B: body}
	out := make([]counting.Verdict, 0, len(cands))
	ok := plainResults(&d, func() bool {
		var c *counting.Candidate
		if k := len(out); k < len(cands) {
			c = &cands[k]
		}
		out = append(out, counting.Verdict{})
		return readVerdict(&d, &out[len(out)-1], c)
	})
	if !ok {
		return nil, false
	}
	return out, true
}

// readVerdict reads one verdict into v; c, when not nil, is the candidate
// it answers.
func readVerdict(d *jsonscan.Decoder, v *counting.Verdict, c *counting.Candidate) bool {
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "cid":
			return 1 << 0, sameStr(d, &v.CID, c, func(c *counting.Candidate) string { return c.CID })
		case "crid":
			return 1 << 1, sameStr(d, &v.CRID, c, func(c *counting.Candidate) string { return c.CRID })
		case "allowed":
			return 1 << 2, d.Bool(&v.Allowed)
		case "code":
			return 1 << 3, d.Int(&v.Code)
		case "msg":
			return 1 << 4, d.Str(&v.Msg)
		case "cap":
			v.Cap = new(counting.Cap)
			return 1 << 5, readCap(d, v.Cap)
		case "reason":
			return 1 << 6, reasonStr(d, &v.Reason)
		case "count":
			return 1 << 7, d.Int64(&v.Count)
		case "degraded":
			return 1 << 8, d.Bool(&v.Degraded)
		case "stale":
			return 1 << 9, d.Bool(&v.Stale)
		case "ageMs":
			return 1 << 10, d.Int64(&v.AgeMs)
		case "reserved":
			return 1 << 11, d.Int64(&v.Reserved)
		}
		return 0, false
	})
}

// readCap reads the cap that blocks a verdict.
func readCap(d *jsonscan.Decoder, c *counting.Cap) bool {
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "level":
			return 1 << 0, d.Str(&c.Level)
		case "event":
			return 1 << 1, d.Str(&c.Event)
		case "dim":
			return 1 << 2, d.Str(&c.Dim)
		case "window":
			return 1 << 3, d.Members(func(name []byte) (uint32, bool) {
				switch string(name) {
				case "unit":
					return 1 << 0, d.Str(&c.Window.Unit)
				case "n":
					return 1 << 1, d.Int(&c.Window.N)
				case "minGapSec":
					return 1 << 2, d.Int(&c.Window.MinGapSec)
				}
				return 0, false
			})
		case "limit":
			return 1 << 4, d.Int64(&c.Limit)
		case "then":
			return 1 << 5, d.Str(&c.Then)
		}
		return 0, false
	})
}

// sameStr reads a string into dst, sharing of(c)'s when it is the same.
func sameStr(d *jsonscan.Decoder, dst *string, c *counting.Candidate, of func(*counting.Candidate) string) bool {
	s, ok := d.RawString()
	if !ok || !utf8.Valid(s) {
		return false
	}
	if c != nil && of(c) == string(s) {
		*dst = of(c)
	} else {
		*dst = string(s)
	}
	return true
}

// reasonStr reads a verdict's reason: one a counter gives, without a
// copy.
func reasonStr(d *jsonscan.Decoder, dst *string) bool {
	s, ok := d.RawString()
	if !ok || !utf8.Valid(s) {
		return false
	}
	for _, r := range verdictReasons {
		if string(s) == string(r) {
			*dst = string(r)
			return true
		}
	}
	*dst = string(s)
	return true
}

// verdictReasons are the reasons a decide's verdict gives.
var verdictReasons = [...]Reason{DayCap, WindowCap, WeekCap, MonthCap, LifetimeCap, PaceLimit, PaceGap, Suppressed, NoIdentity}
