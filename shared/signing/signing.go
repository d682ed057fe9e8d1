// Package signing signs and verifies freqcap's notice URLs, so that only
// the bidder that served an ad can have it counted, and only for the event
// it was signed for.
//
// The canonical string is made of the query parameters that stand before
// sig in the URL: decoded, sorted by name (then by value), each written
// name=value with RFC 3986 percent-encoding (A-Z a-z 0-9 - . _ ~ as they
// are, every other byte %XX in upper case), joined by &. kid, exp (unix
// seconds) and v=2 are among them, required and signed. sig is the
// lowercase hex HMAC-SHA256, under the key named by kid, of the event the
// URL counts (its path: win, billing, imp), a line feed, and the canonical
// string: a URL signed for the impression pixel counts no win.
//
// Version 1 (no v parameter) signed the canonical string alone, so one
// URL counted under every event path; a Verifier takes it only with
// AcceptV1, while bidders move to version 2.
//
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

// Sum is the signature of a string under secret.
func Sum(secret []byte, signed string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(signed))
	return hex.EncodeToString(m.Sum(nil))
}

// Version is the signing scheme SignQuery writes (the v parameter).
const Version = "2"

// StringToSign is what a version 2 signature covers: the event, a line
// feed, the canonical string.
func StringToSign(event, canonical string) string { return event + "\n" + canonical }

// SignQuery returns the query string of a notice URL signed for event:
// ps with v, kid and exp, in canonical order and encoding, then sig.
// Append unsigned parameters (exchange macros) after it.
func SignQuery(kid string, secret []byte, exp time.Time, event string, ps []Param) string {
	all := append(slices.Clone(ps), Param{"v", Version}, Param{"kid", kid}, Param{"exp", strconv.FormatInt(exp.Unix(), 10)})
	c := Canonical(all)
	return c + "&sig=" + Sum(secret, StringToSign(event, c))
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
	Version1   = "v1_refused"  // a version 1 signature, without AcceptV1
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
	// MaxAge is how far ahead exp may be, by event ("" for any other
	// event): CALLBACK_MAX_NOTICE_AGE. A record of each notice is kept
	// until its exp, so this bounds that memory.
	MaxAge map[string]time.Duration
	// AcceptV1 takes version 1 signatures too, which do not cover the
	// event (CALLBACK_SIGNING_ACCEPT_V1, while bidders migrate).
	AcceptV1 bool
	Now      func() time.Time
}

// Signed is what a verified notice URL says.
type Signed struct {
	// Params are the signed parameters (those before sig) but v, kid and
	// exp: the only ones a notice may be counted from.
	Params  url.Values
	Exp     time.Time
	KeyID   string
	Version int
}

// beforeSig decodes the parameters of a raw query string up to sig, and
// sig itself (found says it was there).
func beforeSig(rawQuery string) (ps []Param, sig string, found bool, err error) {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, val, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, "", false, &Error{Malformed, fmt.Sprintf("parameter %q does not decode", k)}
		}
		value, err := url.QueryUnescape(val)
		if err != nil {
			return nil, "", false, &Error{Malformed, fmt.Sprintf("parameter %s: value %q does not decode", name, val)}
		}
		if name == "sig" {
			return ps, value, true, nil
		}
		ps = append(ps, Param{name, value})
	}
	return ps, "", false, nil
}

// Verify checks the signature of a raw query string for event (the path
// the notice came to).
func (v *Verifier) Verify(event, rawQuery string) (*Signed, error) {
	ps, sig, found, err := beforeSig(rawQuery)
	if err != nil {
		return nil, err
	}
	signed := url.Values{}
	for _, p := range ps {
		signed.Add(p.Name, p.Value)
	}
	kid, exp, ver := signed.Get("kid"), signed.Get("exp"), signed.Get("v")
	switch {
	case !found:
		return nil, &Error{Missing, "no sig parameter"}
	case kid == "" || exp == "":
		return nil, &Error{Missing, "kid and exp must be signed (before sig)"}
	case len(signed["kid"]) > 1 || len(signed["exp"]) > 1 || len(signed["v"]) > 1:
		return nil, &Error{Malformed, "v, kid and exp must be given once"}
	case ver != "" && ver != Version:
		return nil, &Error{Malformed, fmt.Sprintf("v=%q: the signing versions are 2 (and 1, without v)", ver)}
	case ver == "" && !v.AcceptV1:
		return nil, &Error{Version1, "a version 1 signature (no v=2) does not cover the event: sign with version 2"}
	}
	key, ok := v.Keys[kid]
	if !ok {
		return nil, &Error{UnknownKid, fmt.Sprintf("no key %q", kid)}
	}
	out := &Signed{KeyID: kid, Version: 1}
	toSign := Canonical(ps)
	if ver == Version {
		toSign, out.Version = StringToSign(event, toSign), 2
	}
	if !hmac.Equal([]byte(strings.ToLower(sig)), []byte(Sum(key, toSign))) {
		return nil, &Error{BadSig, "the signature does not match the parameters before sig and the event " + event}
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return nil, &Error{Malformed, fmt.Sprintf("exp %q is not unix seconds", exp)}
	}
	maxAge, ok := v.MaxAge[event]
	if !ok {
		maxAge = v.MaxAge[""]
	}
	now := v.Now()
	switch at := time.Unix(e, 0); {
	case !at.After(now):
		return nil, &Error{Expired, fmt.Sprintf("expired %s ago", now.Sub(at).Round(time.Second))}
	case at.Sub(now) > maxAge:
		return nil, &Error{TooFar, fmt.Sprintf("exp is %s ahead, more than the %s a %s notice may be", at.Sub(now).Round(time.Second), maxAge, event)}
	default:
		out.Exp = at
	}
	signed.Del("v")
	signed.Del("kid")
	signed.Del("exp")
	out.Params = signed
	return out, nil
}
