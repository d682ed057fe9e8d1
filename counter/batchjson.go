package main

import (
	"bytes"
	"unicode/utf8"

	"github.com/freqcap/freqcap/shared/counting"
)

// The bodies of POST /v1/freq/batch (the bidder's read of its candidates)
// and /v1/incr/batch (callback's forwarding) are decoded here without
// go-json-experiment's reflection, which took a fifth of the counter's CPU
// on both. What is read is only the plain form of a batch: objects of
// known members, each once, strings without escapes (valid UTF-8), plain
// unsigned numbers, true and false. Anything else (null, a negative or
// fractional number, an escape, an unknown or repeated member, a
// dimension named twice) goes to httpjson.Unmarshal, which decodes it or
// says what is wrong, as before. FuzzBatchJSON checks the two agree.

var cidName = []byte(`"cid"`)

// decodeBatchFast decodes the plain form of a batch into req; false (req
// untouched) when b is not plain.
func decodeBatchFast(b []byte, req *counting.BatchRequest) bool {
	d := decoder{b: b}
	var r counting.BatchRequest
	ok := d.members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "items":
			return 1, d.array(func() bool {
				if r.Items == nil {
					// About one "cid" a item: the items grow once at most.
					r.Items = make([]counting.BatchItem, 0, max(1, bytes.Count(d.b, cidName)))
				}
				r.Items = append(r.Items, counting.BatchItem{})
				return d.batchItem(&r.Items[len(r.Items)-1])
			}, func() { r.Items = make([]counting.BatchItem, 0, 16) })
		case "quiet":
			return 2, d.bool(&r.Quiet)
		}
		return 0, false
	})
	if !ok || !blank(d.b) {
		return false
	}
	*req = r
	return true
}

// batchItem reads one item of a batch.
func (d *decoder) batchItem(it *counting.BatchItem) bool {
	return d.members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "cid":
			return 1 << 0, d.string(&it.CID)
		case "level":
			return 1 << 1, d.string(&it.Level)
		case "event":
			return 1 << 2, d.string(&it.Event)
		case "dims":
			return 1 << 3, d.dims(&it.Dims)
		case "windowHours":
			return 1 << 4, d.ints(&it.WindowHours)
		case "paceWindowSec":
			return 1 << 5, d.int(&it.PaceWindowSec)
		case "week":
			return 1 << 6, d.bool(&it.Week)
		case "month":
			return 1 << 7, d.bool(&it.Month)
		case "zone":
			return 1 << 8, d.string(&it.Zone)
		case "lifetimeEnd":
			return 1 << 9, d.int64(&it.LifetimeEnd)
		case "periods":
			return 1 << 10, d.periods(&it.Periods)
		case "eid":
			return 1 << 11, d.string(&it.EID)
		case "release":
			return 1 << 12, d.bool(&it.Release)
		case "lost":
			return 1 << 13, d.bool(&it.Lost)
		case "levels":
			return 1 << 14, d.array(func() bool {
				it.Levels = append(it.Levels, counting.LevelCount{})
				return d.levelCount(&it.Levels[len(it.Levels)-1])
			}, func() { it.Levels = []counting.LevelCount{} })
		}
		return 0, false
	})
}

// levelCount reads one more level of a write.
func (d *decoder) levelCount(l *counting.LevelCount) bool {
	return d.members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "level":
			return 1 << 0, d.string(&l.Level)
		case "id":
			return 1 << 1, d.string(&l.ID)
		case "dims":
			return 1 << 2, d.array(func() bool {
				var s string
				ok := d.string(&s)
				l.Dims = append(l.Dims, s)
				return ok
			}, func() { l.Dims = []string{} })
		case "windowHours":
			return 1 << 3, d.ints(&l.WindowHours)
		case "paceWindowSec":
			return 1 << 4, d.int(&l.PaceWindowSec)
		case "week":
			return 1 << 5, d.bool(&l.Week)
		case "month":
			return 1 << 6, d.bool(&l.Month)
		case "zone":
			return 1 << 7, d.string(&l.Zone)
		case "lifetimeEnd":
			return 1 << 8, d.int64(&l.LifetimeEnd)
		case "periods":
			return 1 << 9, d.periods(&l.Periods)
		case "lost":
			return 1 << 10, d.bool(&l.Lost)
		}
		return 0, false
	})
}

// periods reads a list of natural periods.
func (d *decoder) periods(ps *[]counting.Period) bool {
	return d.array(func() bool {
		var p counting.Period
		ok := d.members(func(name []byte) (uint32, bool) {
			switch string(name) {
			case "unit":
				return 1, d.string(&p.Unit)
			case "n":
				return 2, d.int(&p.N)
			}
			return 0, false
		})
		*ps = append(*ps, p)
		return ok
	}, func() { *ps = []counting.Period{} })
}

// dims reads an object of plain strings, each name once. The names
// repeat from item to item (device, bundle, ...): each is made a string
// once per body.
func (d *decoder) dims(m *map[string]string) bool {
	dims := make(map[string]string, 2)
	ok := d.members(func(name []byte) (uint32, bool) {
		if _, dup := dims[string(name)]; dup {
			return 0, false
		}
		v, ok := d.rawString()
		if !ok || !utf8.Valid(v) {
			return 0, false
		}
		k, ok := d.name(name)
		dims[k] = string(v)
		return 0, ok
	})
	*m = dims
	return ok
}

// name is name as a string, the same string for the same bytes within a
// body; false when it is not UTF-8.
func (d *decoder) name(name []byte) (string, bool) {
	for _, s := range d.names {
		if s == string(name) {
			return s, true
		}
	}
	if !utf8.Valid(name) {
		return "", false
	}
	s := string(name)
	if len(d.names) < 8 {
		d.names = append(d.names, s)
	}
	return s, true
}

// members reads an object, calling field for each member's name (the
// bytes of a plain string, without escapes) with the decoder at its value.
// field reads the value and answers the member's bit (0 for none), which
// no other member of the object may have: a repeated member is not plain.
func (d *decoder) members(field func(name []byte) (uint32, bool)) bool {
	if !d.take('{') {
		return false
	}
	if d.take('}') {
		return true
	}
	var seen uint32
	for {
		name, ok := d.rawString()
		if !ok {
			return false
		}
		d.skipSpace()
		if len(d.b) == 0 || d.b[0] != ':' {
			return false
		}
		d.b = d.b[1:]
		bit, ok := field(name)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if more, ok := d.more('}'); !more {
			return ok
		}
	}
}

// array reads an array, calling elem for each element; empty is called
// for an empty array (a JSON [] decodes to an empty, not a nil, slice).
func (d *decoder) array(elem func() bool, empty func()) bool {
	if !d.take('[') {
		return false
	}
	if d.take(']') {
		empty()
		return true
	}
	for {
		if !elem() {
			return false
		}
		if more, ok := d.more(']'); !more {
			return ok
		}
	}
}

// take reads c when it comes next (after whitespace).
func (d *decoder) take(c byte) bool {
	d.skipSpace()
	if len(d.b) == 0 || d.b[0] != c {
		return false
	}
	d.b = d.b[1:]
	return true
}

// more reads what follows a member or element: a comma (more) or the
// closing c (the end, ok); anything else is not plain.
func (d *decoder) more(closing byte) (more, ok bool) {
	if d.take(',') {
		return true, true
	}
	return false, d.take(closing)
}

// rawString reads a string without escapes or control characters and
// returns its bytes, which are b's.
func (d *decoder) rawString() ([]byte, bool) {
	d.skipSpace()
	if len(d.b) == 0 || d.b[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(d.b); i++ {
		switch c := d.b[i]; {
		case c == '"':
			s := d.b[1:i]
			d.b = d.b[i+1:]
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// ints reads an array of plain unsigned numbers.
func (d *decoder) ints(dst *[]int) bool {
	return d.array(func() bool {
		var n int
		ok := d.int(&n)
		*dst = append(*dst, n)
		return ok
	}, func() { *dst = []int{} })
}

// int reads a plain unsigned number of at most 18 digits.
func (d *decoder) int(dst *int) bool {
	var n int64
	ok := d.int64(&n)
	*dst = int(n)
	return ok
}

// int64 reads a plain unsigned number of at most 18 digits: no sign, no
// leading zero, no fraction or exponent.
func (d *decoder) int64(dst *int64) bool {
	d.skipSpace()
	n, v := 0, int64(0)
	for n < len(d.b) && d.b[n] >= '0' && d.b[n] <= '9' {
		v = v*10 + int64(d.b[n]-'0')
		n++
	}
	if n == 0 || n > 18 || n > 1 && d.b[0] == '0' {
		return false
	}
	if n < len(d.b) && (d.b[n] == '.' || d.b[n] == 'e' || d.b[n] == 'E') {
		return false
	}
	*dst, d.b = v, d.b[n:]
	return true
}

// bool reads true or false.
func (d *decoder) bool(dst *bool) bool {
	d.skipSpace()
	switch {
	case len(d.b) >= 4 && string(d.b[:4]) == "true":
		*dst, d.b = true, d.b[4:]
	case len(d.b) >= 5 && string(d.b[:5]) == "false":
		*dst, d.b = false, d.b[5:]
	default:
		return false
	}
	return true
}
