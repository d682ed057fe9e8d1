package client

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/freqcap/freqcap/shared/jsonscan"
)

// The counter's answer to Decide's batch read (POST /v1/freq/batch) is
// read here, in the plain form the counter writes, straight into the
// counts of the caps asked about: no maps of dimensions and windows, which
// took about a third of a bidder's CPU per Decide over HTTP. Anything
// else (an escape, null, a sign, a member the answer does not have, a
// dimension not asked for, a count that is not the answer of these caps)
// goes to the full decoder, which reads it as before. FuzzCapAnswers
// checks the two agree.

// capAnswers reads body, the counter's answer to the batch read of the
// caps refs name, into their counts; false when it is not in the plain
// form or not a successful answer of as many results.
func capAnswers(body []byte, cands []Candidate, refs []ref) ([]counted, bool) {
	d := jsonscan.Decoder{B: body}
	out := newCounted(cands, refs)
	k := 0
	ok := plainResults(&d, func() bool {
		if k == len(refs) {
			return false // more results than items
		}
		cp, g := &cands[refs[k].cand].Caps[refs[k].cap], &out[k]
		k++
		return capAnswer(&d, cp, g)
	})
	if !ok || k != len(refs) {
		return nil, false
	}
	return out, true
}

// plainResults reads a counter's {"code","msg","results"} answer in its
// plain form from d, calling result to read each of its results from d;
// false when it is not plain, has no results or is not a successful
// answer. (result takes no decoder: one passed to a function value would
// be moved to the heap on every call.)
func plainResults(d *jsonscan.Decoder, result func() bool) bool {
	var code int
	var msg []byte
	var results bool
	ok := d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "code":
			return 1 << 0, d.Int(&code)
		case "msg":
			var ok bool
			msg, ok = d.RawString()
			return 1 << 1, ok
		case "results":
			results = true
			return 1 << 2, d.Array(result, func() {})
		}
		return 0, false
	})
	return ok && results && jsonscan.Blank(d.B) && code == 0 && utf8.Valid(msg)
}

// capAnswer reads one result (a counting.Answer) into g, the counts of
// cap cp: the cap's own dimension is the only one it may hold.
func capAnswer(d *jsonscan.Decoder, cp *Cap, g *counted) bool {
	var code int
	var degraded bool
	ok := d.Members(func(name []byte) (uint32, bool) {
		var n int
		var b bool
		switch string(name) {
		case "code":
			return 1 << 0, d.Int(&code)
		case "msg":
			return 1 << 1, skipString(d)
		case "cid":
			return 1 << 2, skipString(d)
		case "level":
			return 1 << 3, skipString(d)
		case "event":
			return 1 << 4, skipString(d)
		case "windowHours":
			return 1 << 5, d.Array(func() bool { return d.Int(&n) }, func() {})
		case "paceWindowSec":
			return 1 << 6, d.Int(&n)
		case "counts":
			return 1 << 7, d.Members(func(dim []byte) (uint32, bool) {
				if string(dim) != cp.Dim {
					return 0, false
				}
				return 1, dimCounts(d, cp, g)
			})
		case "degraded":
			return 1 << 8, d.Bool(&degraded)
		case "stale":
			return 1 << 9, d.Bool(&g.stale)
		case "ageMs":
			return 1 << 10, d.Int64(&g.ageMs)
		case "duplicate":
			return 1 << 11, d.Bool(&b)
		}
		return 0, false
	})
	g.failed = degraded || code != 0
	return ok
}

// dimCounts reads one dimension's counts (a counting.Counts) into g: the
// day, each of cp's windows from the window of its hours, the exact
// window; the others are read past.
func dimCounts(d *jsonscan.Decoder, cp *Cap, g *counted) bool {
	var n int64
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "day":
			return 1 << 0, d.Int64(&g.day)
		case "windows":
			return 1 << 1, d.Members(func(hours []byte) (uint32, bool) {
				var v int64
				if !d.Int64(&v) {
					return 0, false
				}
				// A window named twice: the last one, as a map keeps it.
				for i, w := range cp.Windows {
					var buf [20]byte
					if bytes.Equal(hours, strconv.AppendInt(buf[:0], int64(w.Hours), 10)) {
						g.windows[i] = v
					}
				}
				return 0, true
			})
		case "pace":
			g.pace = &g.paceOf
			return 1 << 2, d.Members(func(name []byte) (uint32, bool) {
				switch string(name) {
				case "count":
					return 1 << 0, d.Int64(&g.paceOf.Count)
				case "lastAt":
					return 1 << 1, d.Int64(&g.paceOf.LastAt)
				}
				return 0, false
			})
		case "week":
			return 1 << 3, d.Int64(&n)
		case "month":
			return 1 << 4, d.Int64(&n)
		case "lifetime":
			return 1 << 5, d.Int64(&n)
		case "periods":
			return 1 << 6, d.Members(func([]byte) (uint32, bool) { return 0, d.Int64(&n) })
		}
		return 0, false
	})
}

// skipString reads past a plain string, valid UTF-8.
func skipString(d *jsonscan.Decoder) bool {
	s, ok := d.RawString()
	return ok && utf8.Valid(s)
}
