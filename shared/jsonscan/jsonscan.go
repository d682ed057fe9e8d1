// Package jsonscan reads the plain form of JSON bodies on hot paths
// without reflection: objects of known members, each once, strings without
// escapes or control characters, plain unsigned numbers, true and false.
// A reader answers false for anything else (null, a sign, a fraction or an
// exponent, an escape, a repeated member), and its caller hands the body
// to a full decoder, which decodes it or says what is wrong with it: a
// body decodes to the same value either way.
//
// The counter reads its batch, decide, limit and Connect bodies with it;
// the client reads the counter's answers.
package jsonscan

import (
	"strconv"
	"unicode/utf8"
)

// Decoder reads plain JSON values from B, which each read moves past the
// value it read.
type Decoder struct {
	B []byte
}

// SkipSpace moves past JSON whitespace.
func (d *Decoder) SkipSpace() {
	for len(d.B) > 0 && (d.B[0] == ' ' || d.B[0] == '\t' || d.B[0] == '\n' || d.B[0] == '\r') {
		d.B = d.B[1:]
	}
}

// Blank reports whether b holds only whitespace: what may follow a body.
func Blank(b []byte) bool {
	d := Decoder{B: b}
	d.SkipSpace()
	return len(d.B) == 0
}

// Members reads an object, calling field for each member's name (the
// bytes of a plain string, without escapes) with the decoder at its value.
// field reads the value and answers the member's bit (0 for none), which
// no other member of the object may have: a repeated member is not plain.
func (d *Decoder) Members(field func(name []byte) (uint32, bool)) bool {
	if !d.Take('{') {
		return false
	}
	if d.Take('}') {
		return true
	}
	var seen uint32
	for {
		name, ok := d.RawString()
		if !ok {
			return false
		}
		d.SkipSpace()
		if len(d.B) == 0 || d.B[0] != ':' {
			return false
		}
		d.B = d.B[1:]
		bit, ok := field(name)
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if more, ok := d.More('}'); !more {
			return ok
		}
	}
}

// Array reads an array, calling elem for each element; empty is called
// for an empty array (a JSON [] decodes to an empty, not a nil, slice).
func (d *Decoder) Array(elem func() bool, empty func()) bool {
	if !d.Take('[') {
		return false
	}
	if d.Take(']') {
		empty()
		return true
	}
	for {
		if !elem() {
			return false
		}
		if more, ok := d.More(']'); !more {
			return ok
		}
	}
}

// Take reads c when it comes next (after whitespace).
func (d *Decoder) Take(c byte) bool {
	d.SkipSpace()
	if len(d.B) == 0 || d.B[0] != c {
		return false
	}
	d.B = d.B[1:]
	return true
}

// More reads what follows a member or element: a comma (more) or the
// closing c (the end, ok); anything else is not plain.
func (d *Decoder) More(closing byte) (more, ok bool) {
	if d.Take(',') {
		return true, true
	}
	return false, d.Take(closing)
}

// RawString reads a string without escapes or control characters and
// returns its bytes, which are B's.
func (d *Decoder) RawString() ([]byte, bool) {
	d.SkipSpace()
	if len(d.B) == 0 || d.B[0] != '"' {
		return nil, false
	}
	for i := 1; i < len(d.B); i++ {
		switch c := d.B[i]; {
		case c == '"':
			s := d.B[1:i]
			d.B = d.B[i+1:]
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// Str reads a string without escapes or control characters, valid UTF-8.
func (d *Decoder) Str(dst *string) bool {
	s, ok := d.RawString()
	if !ok || !utf8.Valid(s) {
		return false
	}
	*dst = string(s)
	return true
}

// Ints reads an array of plain unsigned numbers.
func (d *Decoder) Ints(dst *[]int) bool {
	return d.Array(func() bool {
		var n int
		ok := d.Int(&n)
		*dst = append(*dst, n)
		return ok
	}, func() { *dst = []int{} })
}

// Int reads a plain unsigned number of at most 18 digits.
func (d *Decoder) Int(dst *int) bool {
	var n int64
	ok := d.Int64(&n)
	*dst = int(n)
	return ok
}

// Int64 reads a plain unsigned number of at most 18 digits: no sign, no
// leading zero, no fraction or exponent.
func (d *Decoder) Int64(dst *int64) bool {
	d.SkipSpace()
	n, v := 0, int64(0)
	for n < len(d.B) && d.B[n] >= '0' && d.B[n] <= '9' {
		v = v*10 + int64(d.B[n]-'0')
		n++
	}
	if n == 0 || n > 18 || n > 1 && d.B[0] == '0' {
		return false
	}
	if n < len(d.B) && (d.B[n] == '.' || d.B[n] == 'e' || d.B[n] == 'E') {
		return false
	}
	*dst, d.B = v, d.B[n:]
	return true
}

// Uint32 reads a plain unsigned number: digits, no leading zero, in range.
func (d *Decoder) Uint32(dst *uint32) bool {
	d.SkipSpace()
	n := 0
	for n < len(d.B) && d.B[n] >= '0' && d.B[n] <= '9' {
		n++
	}
	if n == 0 || n > 10 || n > 1 && d.B[0] == '0' {
		return false
	}
	if n < len(d.B) && (d.B[n] == '.' || d.B[n] == 'e' || d.B[n] == 'E') {
		return false
	}
	u, err := strconv.ParseUint(string(d.B[:n]), 10, 32)
	if err != nil {
		return false
	}
	*dst, d.B = uint32(u), d.B[n:]
	return true
}

// Bool reads true or false.
func (d *Decoder) Bool(dst *bool) bool {
	d.SkipSpace()
	switch {
	case len(d.B) >= 4 && string(d.B[:4]) == "true":
		*dst, d.B = true, d.B[4:]
	case len(d.B) >= 5 && string(d.B[:5]) == "false":
		*dst, d.B = false, d.B[5:]
	default:
		return false
	}
	return true
}
