package main

import (
	"bytes"
	"unicode/utf8"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/jsonscan"
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

var openBrace = []byte{'{'}

// decodeBatchFast decodes the plain form of a batch into req; false (req
// untouched) when b is not plain.
func decodeBatchFast(b []byte, req *counting.BatchRequest) bool {
	d := decoder{Decoder: jsonscan.Decoder{B: b}}
	var r counting.BatchRequest
	ok := d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "items":
			return 1, d.Array(func() bool {
				if r.Items == nil {
					// An item has one '{' and a few more (its dims', its
					// levels'): room for all at once, counted by one vector
					// pass where counting each "cid" searched for it anew.
					r.Items = make([]counting.BatchItem, 0, max(1, bytes.Count(d.B, openBrace)))
				}
				r.Items = append(r.Items, counting.BatchItem{})
				return d.batchItem(&r.Items[len(r.Items)-1])
			}, func() { r.Items = make([]counting.BatchItem, 0, 16) })
		case "quiet":
			return 2, d.Bool(&r.Quiet)
		}
		return 0, false
	})
	if !ok || !jsonscan.Blank(d.B) {
		return false
	}
	*req = r
	return true
}

// batchItem reads one item of a batch.
func (d *decoder) batchItem(it *counting.BatchItem) bool {
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "cid":
			return 1 << 0, d.Str(&it.CID)
		case "level":
			return 1 << 1, d.Str(&it.Level)
		case "event":
			return 1 << 2, d.Str(&it.Event)
		case "dims":
			return 1 << 3, d.dims(&it.Dims)
		case "windowHours":
			return 1 << 4, d.Ints(&it.WindowHours)
		case "paceWindowSec":
			return 1 << 5, d.Int(&it.PaceWindowSec)
		case "week":
			return 1 << 6, d.Bool(&it.Week)
		case "month":
			return 1 << 7, d.Bool(&it.Month)
		case "zone":
			return 1 << 8, d.Str(&it.Zone)
		case "lifetimeEnd":
			return 1 << 9, d.Int64(&it.LifetimeEnd)
		case "periods":
			return 1 << 10, d.periods(&it.Periods)
		case "eid":
			return 1 << 11, d.Str(&it.EID)
		case "release":
			return 1 << 12, d.Bool(&it.Release)
		case "lost":
			return 1 << 13, d.Bool(&it.Lost)
		case "levels":
			return 1 << 14, d.Array(func() bool {
				it.Levels = append(it.Levels, counting.LevelCount{})
				return d.levelCount(&it.Levels[len(it.Levels)-1])
			}, func() { it.Levels = []counting.LevelCount{} })
		}
		return 0, false
	})
}

// levelCount reads one more level of a write.
func (d *decoder) levelCount(l *counting.LevelCount) bool {
	return d.Members(func(name []byte) (uint32, bool) {
		switch string(name) {
		case "level":
			return 1 << 0, d.Str(&l.Level)
		case "id":
			return 1 << 1, d.Str(&l.ID)
		case "dims":
			return 1 << 2, d.Array(func() bool {
				var s string
				ok := d.Str(&s)
				l.Dims = append(l.Dims, s)
				return ok
			}, func() { l.Dims = []string{} })
		case "windowHours":
			return 1 << 3, d.Ints(&l.WindowHours)
		case "paceWindowSec":
			return 1 << 4, d.Int(&l.PaceWindowSec)
		case "week":
			return 1 << 5, d.Bool(&l.Week)
		case "month":
			return 1 << 6, d.Bool(&l.Month)
		case "zone":
			return 1 << 7, d.Str(&l.Zone)
		case "lifetimeEnd":
			return 1 << 8, d.Int64(&l.LifetimeEnd)
		case "periods":
			return 1 << 9, d.periods(&l.Periods)
		case "lost":
			return 1 << 10, d.Bool(&l.Lost)
		}
		return 0, false
	})
}

// periods reads a list of natural periods.
func (d *decoder) periods(ps *[]counting.Period) bool {
	return d.Array(func() bool {
		var p counting.Period
		ok := d.Members(func(name []byte) (uint32, bool) {
			switch string(name) {
			case "unit":
				return 1, d.Str(&p.Unit)
			case "n":
				return 2, d.Int(&p.N)
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
	ok := d.Members(func(name []byte) (uint32, bool) {
		if _, dup := dims[string(name)]; dup {
			return 0, false
		}
		v, ok := d.RawString()
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
