package signing

import (
	"errors"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeVector is the test vector README gives bidders: the secret, a
// signed URL and its signature.
func readmeVector(t *testing.T) (secret, rawURL, sig string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	get := func(label string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + ` (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("README has no %q line in its test vector", label)
		}
		return string(m[1])
	}
	return get("secret (base64):"), get("URL:"), get("sig:")
}

func TestREADMETestVector(t *testing.T) {
	secret, rawURL, sig := readmeVector(t)
	keys, err := ParseKeys("k1:" + secret)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if got := u.Query().Get("sig"); got != sig {
		t.Fatalf("README's URL carries sig %s, its sig line says %s", got, sig)
	}
	exp := time.Unix(1796313600, 0)
	v := &Verifier{Keys: keys, MaxAge: 24 * time.Hour, Now: func() time.Time { return exp.Add(-time.Hour) }}
	signed, err := v.Verify(u.RawQuery)
	if err != nil {
		t.Fatalf("README's vector does not verify: %v", err)
	}
	if signed.Get("eid") != "req-1:imp-1" || signed.Has("price") {
		t.Errorf("signed parameters %v: want eid req-1:imp-1 and no price (it stands after sig)", signed)
	}
	// The same parameters signed here give README's signature.
	var ps []Param
	for name, vs := range signed {
		if name != "kid" && name != "exp" {
			ps = append(ps, Param{name, vs[0]})
		}
	}
	q := SignQuery("k1", keys["k1"], exp, ps)
	if !strings.HasSuffix(q, "&sig="+sig) {
		t.Errorf("SignQuery = %s, want sig %s", q, sig)
	}
}

func TestVerifyRefusesWithAReason(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	keys := Keys{"k1": secret, "k2": []byte("another secret of 16+ bytes")}
	now := time.Unix(1_800_000_000, 0)
	v := &Verifier{Keys: keys, MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}
	good := SignQuery("k1", secret, now.Add(time.Hour), []Param{{"cid", "42"}, {"device", "a b/ü"}, {"eid", "r:1"}})
	if _, err := v.Verify(good + "&price=${AUCTION_PRICE}&cid=99"); err != nil {
		t.Fatalf("a signed URL with parameters appended after sig: %v", err)
	}
	signed, _ := v.Verify(good + "&cid=99")
	if signed["cid"][0] != "42" || len(signed["cid"]) != 1 {
		t.Errorf("a cid after sig changed the signed cid: %v", signed)
	}
	for name, tt := range map[string]struct{ query, reason string }{
		"no sig":         {strings.Split(good, "&sig=")[0], Missing},
		"no kid":         {SignQuery("", secret, now.Add(time.Hour), []Param{{"cid", "42"}}), Missing},
		"unknown kid":    {SignQuery("k9", secret, now.Add(time.Hour), []Param{{"cid", "42"}}), UnknownKid},
		"other key":      {SignQuery("k2", secret, now.Add(time.Hour), []Param{{"cid", "42"}}), BadSig},
		"tampered value": {strings.Replace(good, "cid=42", "cid=43", 1), BadSig},
		"added before":   {"cid=7&" + good, BadSig},
		"expired":        {SignQuery("k1", secret, now.Add(-time.Second), []Param{{"cid", "42"}}), Expired},
		"exp now":        {SignQuery("k1", secret, now, []Param{{"cid", "42"}}), Expired},
		"too far":        {SignQuery("k1", secret, now.Add(25*time.Hour), []Param{{"cid", "42"}}), TooFar},
		"bad escape":     {"cid=4%zz&" + good, Malformed},
		"exp not a time": {"cid=42&kid=k1&exp=soon&sig=" + Sum(secret, "cid=42&exp=soon&kid=k1"), Malformed},
		"kid twice":      {"kid=k1&" + good, Malformed},
	} {
		_, err := v.Verify(tt.query)
		var se *Error
		if !errors.As(err, &se) || se.Reason != tt.reason {
			t.Errorf("%s (%s): %v, want reason %s", name, tt.query, err, tt.reason)
		}
	}
}

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("old:MDEyMzQ1Njc4OWFiY2RlZg==, new:ZnJlcWNhcC10ZXN0LXZlY3Rvci1rZXk=")
	if err != nil || len(keys) != 2 || string(keys["old"]) != "0123456789abcdef" {
		t.Fatalf("ParseKeys: %v %v", keys, err)
	}
	for _, bad := range []string{"", "k1", "k1:!!!", "k1:c2hvcnQ=", "k 1:MDEyMzQ1Njc4OWFiY2RlZg==", "a:MDEyMzQ1Njc4OWFiY2RlZg==,a:MDEyMzQ1Njc4OWFiY2RlZg=="} {
		if _, err := ParseKeys(bad); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}

func TestEncodeIsRFC3986(t *testing.T) {
	if got := Encode("aZ09-._~ :/?#[]@!$&'()*+,;=%ü"); got != "aZ09-._~%20%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%25%C3%BC" {
		t.Errorf("Encode = %s", got)
	}
}

// FuzzVerify: any query string is refused with a reason or verified,
// never a panic; a verified one keeps exactly what stood before sig.
func FuzzVerify(f *testing.F) {
	secret := []byte("0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	f.Add(SignQuery("k1", secret, now.Add(time.Hour), []Param{{"cid", "42"}, {"device", "d"}}))
	f.Add("cid=42&sig=00&kid=k1")
	f.Add("%zz=1&sig=")
	f.Add("kid=k1&exp=1800003600&sig=" + Sum(secret, "exp=1800003600&kid=k1") + "&x=${Y}")
	v := &Verifier{Keys: Keys{"k1": secret}, MaxAge: 24 * time.Hour, Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, q string) {
		signed, err := v.Verify(q)
		var se *Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%q: an error without a reason: %v", q, err)
		}
		if err == nil && (signed.Get("kid") != "k1" || signed.Has("sig")) {
			t.Fatalf("%q verified with %v", q, signed)
		}
	})
}
