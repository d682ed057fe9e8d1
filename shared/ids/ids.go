// Package ids validates the identifiers that become part of Redis keys:
// campaign ids and dimension or event ids.
package ids

import (
	"crypto/rand"
	"encoding/base64"
	"unicode"
	"unicode/utf8"
)

// CIDRule and IDRule describe the rules in error messages.
const (
	CIDRule = "1-64 characters of [A-Za-z0-9._-]"
	IDRule  = "1-128 bytes of UTF-8 without whitespace, control, invisible (default-ignorable) or blank characters"
)

// ValidCID reports whether s is a campaign (scope) id: 1-64 characters of
// [A-Za-z0-9._-]. It never contains ':', the key separator.
func ValidCID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidID reports whether s is an opaque id: 1-128 bytes of valid UTF-8
// without whitespace, control or format characters (zero-width spaces,
// joiners, byte-order marks and bidi marks make ids that look alike but
// count apart). Ids are not normalised: what is valid is counted as sent.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unseen(r) { // invalid UTF-8, or unseen
			return false
		}
		i += size
	}
	return true
}

// unseen reports a code point that renders as nothing or as blank space:
// controls, Unicode's White_Space and Default_Ignorable_Code_Point (which
// is the format characters, Other_Default_Ignorable_Code_Point such as
// the Hangul fillers U+3164 and U+FFA0 and the combining grapheme joiner
// U+034F, and the variation selectors), and the Braille blank U+2800.
// Two ids that differ only by these look alike and would count apart.
// The tables are Go's unicode package, kept to the Unicode version of the
// Go release.
func unseen(r rune) bool {
	return unicode.IsControl(r) || r == 0x2800 ||
		unicode.In(r, unicode.White_Space, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// Random returns prefix followed by 96 random bits, URL-safe: an id for an
// event that came without one.
func Random(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// KeyRule describes ValidKey in error messages.
const KeyRule = "1-256 bytes of UTF-8 without control, invisible (default-ignorable) or blank characters but the space"

// ValidKey reports whether s is a business key (frequency control): 1-256 bytes of
// valid UTF-8 without the characters unseen refuses (zero-width spaces,
// byte-order marks, fillers make look-alike keys), but the space.
func ValidKey(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	// ASCII byte by byte, as ValidID: of it, unseen refuses only the
	// controls and whitespace, of which a key keeps the space.
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unseen(r) { // invalid UTF-8, or unseen
			return false
		}
		i += size
	}
	return true
}
