// Package signing signs and verifies freqcap's notice URLs, so that only
// the bidder that served an ad can have it counted.
//
// The signed string (the canonical string) is made of the query
// parameters that stand before sig in the URL: decoded, sorted by name
// (then by value), each written name=value with RFC 3986 percent-encoding
// (A-Z a-z 0-9 - . _ ~ as they are, every other byte %XX in upper case),
// joined by &. sig is the lowercase hex HMAC-SHA256 of it under the key
// named by kid; kid and exp (unix seconds) are required and signed.
// Parameters after sig are not signed and never used for counting: the
// place for macros an exchange substitutes (price=${AUCTION_PRICE}).
package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Param is one query parameter.
type Param struct{ Name, Value string }

// Encode writes s as RFC 3986 percent-encoding: unreserved characters as
// they are, every other byte as %XX in upper case.
func Encode(s string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := range len(s) {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&15])
	}
	return b.String()
}

// Canonical is the string signed for ps.
func Canonical(ps []Param) string {
	sorted := slices.Clone(ps)
	slices.SortFunc(sorted, func(a, b Param) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	parts := make([]string, len(sorted))
	for i, p := range sorted {
		parts[i] = Encode(p.Name) + "=" + Encode(p.Value)
	}
	return strings.Join(parts, "&")
}

// Sum is the signature of the canonical string under secret.
func Sum(secret []byte, canonical string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(canonical))
	return hex.EncodeToString(m.Sum(nil))
}

// SignQuery returns the query string of a signed notice: ps with kid and
// exp, in canonical order and encoding, then sig. Append unsigned
// parameters (exchange macros) after it.
func SignQuery(kid string, secret []byte, exp time.Time, ps []Param) string {
	all := append(slices.Clone(ps), Param{"kid", kid}, Param{"exp", strconv.FormatInt(exp.Unix(), 10)})
	c := Canonical(all)
	return c + "&sig=" + Sum(secret, c)
}

// Keys are the secrets callback accepts, by key id.
type Keys map[string][]byte

// ParseKeys reads CALLBACK_SIGNING_KEYS: kid:base64secret,... (several
// for rotation).
func ParseKeys(s string) (Keys, error) {
	keys := Keys{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		kid, b64, ok := strings.Cut(entry, ":")
		if !ok || kid == "" || Encode(kid) != kid {
			return nil, fmt.Errorf("want kid:base64secret, with a kid of A-Z a-z 0-9 - . _ ~, got %q", entry)
		}
		secret, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("key %s: the secret is not base64: %v", kid, err)
		}
		if len(secret) < 16 {
			return nil, fmt.Errorf("key %s: the secret is %d bytes, want at least 16", kid, len(secret))
		}
		if _, dup := keys[kid]; dup {
			return nil, fmt.Errorf("key %s is given twice", kid)
		}
		keys[kid] = secret
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// Why a notice's signature was refused (the metric's reason label).
const (
	Missing    = "missing"     // no sig, kid or exp
	Malformed  = "malformed"   // a parameter or exp that does not parse
	UnknownKid = "unknown_kid" // kid names no key
	BadSig     = "bad_sig"     // the signature does not match
	Expired    = "expired"     // exp has passed
	TooFar     = "exp_too_far" // exp further ahead than the longest notice age
)

// Error is a refused signature.
type Error struct {
	Reason string
	Msg    string
}

func (e *Error) Error() string { return "notice signature " + e.Reason + ": " + e.Msg }

// Verifier checks notice URLs against Keys.
type Verifier struct {
	Keys Keys
	// MaxAge is how far ahead exp may be (CALLBACK_MAX_NOTICE_AGE).
	MaxAge time.Duration
	Now    func() time.Time
}

// Verify checks the signature of a raw query string and returns the
// signed parameters (those before sig, kid and exp included), the only
// ones a notice may be counted from.
func (v *Verifier) Verify(rawQuery string) (url.Values, error) {
	var ps []Param
	sig, found := "", false
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, val, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, &Error{Malformed, fmt.Sprintf("parameter %q does not decode", k)}
		}
		value, err := url.QueryUnescape(val)
		if err != nil {
			return nil, &Error{Malformed, fmt.Sprintf("parameter %s: value %q does not decode", name, val)}
		}
		if name == "sig" {
			sig, found = value, true
			break
		}
		ps = append(ps, Param{name, value})
	}
	signed := url.Values{}
	for _, p := range ps {
		signed.Add(p.Name, p.Value)
	}
	kid, exp := signed.Get("kid"), signed.Get("exp")
	switch {
	case !found:
		return nil, &Error{Missing, "no sig parameter"}
	case kid == "" || exp == "":
		return nil, &Error{Missing, "kid and exp must be signed (before sig)"}
	case len(signed["kid"]) > 1 || len(signed["exp"]) > 1:
		return nil, &Error{Malformed, "kid and exp must be given once"}
	}
	key, ok := v.Keys[kid]
	if !ok {
		return nil, &Error{UnknownKid, fmt.Sprintf("no key %q", kid)}
	}
	want := Sum(key, Canonical(ps))
	if !hmac.Equal([]byte(strings.ToLower(sig)), []byte(want)) {
		return nil, &Error{BadSig, "the signature does not match the parameters before sig"}
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return nil, &Error{Malformed, fmt.Sprintf("exp %q is not unix seconds", exp)}
	}
	now := v.Now()
	switch at := time.Unix(e, 0); {
	case !at.After(now):
		return nil, &Error{Expired, fmt.Sprintf("expired %s ago", now.Sub(at).Round(time.Second))}
	case at.Sub(now) > v.MaxAge:
		return nil, &Error{TooFar, fmt.Sprintf("exp is %s ahead, more than %s", at.Sub(now).Round(time.Second), v.MaxAge)}
	}
	return signed, nil
}
