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
	IDRule  = "1-128 bytes of UTF-8 without whitespace, control or invisible format characters"
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
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
		i += size
	}
	return true
}

// Random returns prefix followed by 96 random bits, URL-safe: an id for an
// event that came without one.
func Random(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// KeyRule describes ValidKey in error messages.
const KeyRule = "1-256 bytes of UTF-8 without control or invisible format characters"

// ValidKey reports whether s is a business key (seed 002): 1-256 bytes of
// valid UTF-8 without control or format characters (zero-width spaces and
// byte-order marks make look-alike keys). Spaces are allowed.
func ValidKey(s string) bool {
	if len(s) == 0 || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}
