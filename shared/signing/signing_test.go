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

// readmeVector is the test vector docs/security.md gives bidders: the secret, a
// signed URL and its signature.
func readmeVector(t *testing.T) (secret, rawURL, sig string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	get := func(label string) string {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(label) + ` (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("docs/security.md has no %q line in its test vector", label)
		}
		return string(m[1])
	}
	return get("secret (base64):"), get("URL:"), get("sig:")
}

func TestDocumentedTestVector(t *testing.T) {
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
		t.Fatalf("the documented URL carries sig %s, its sig line says %s", got, sig)
	}
	exp := time.Unix(1796313600, 0)
	v := &Verifier{Keys: keys, MaxAge: map[string]time.Duration{"": 24 * time.Hour}, Now: func() time.Time { return exp.Add(-time.Hour) }}
	got, err := v.Verify("win", u.RawQuery)
	if err != nil {
		t.Fatalf("the documented vector does not verify: %v", err)
	}
	signed := got.Params
	if signed.Get("eid") != "req-1:imp-1" || signed.Has("price") || got.Version != 2 || !got.Exp.Equal(exp) {
		t.Errorf("signed %+v: want eid req-1:imp-1, no price (it stands after sig), version 2, exp %v", got, exp)
	}
	// The URL signed for /win counts for no other event.
	for _, event := range []string{"imp", "billing"} {
		var se *Error
		if _, err := v.Verify(event, u.RawQuery); !errors.As(err, &se) || se.Reason != BadSig {
			t.Errorf("the documented /win URL sent to /%s: %v, want %s", event, err, BadSig)
		}
	}
	// The same parameters signed here give the documented signature.
	var ps []Param
	for name, vs := range signed {
		ps = append(ps, Param{name, vs[0]})
	}
	q := SignQuery("k1", keys["k1"], exp, "win", ps)
	if !strings.HasSuffix(q, "&sig="+sig) {
		t.Errorf("SignQuery = %s, want sig %s", q, sig)
	}
}

// Version 1 (no v, the event not signed) is taken only with AcceptV1:
// the vector below is the one the docs gave before version 2.
func TestVersion1OnlyWhenAccepted(t *testing.T) {
	const v1 = "cid=42&device=6f1c2a9e-8a3b&bundle=com.example.app&eid=req-1%3Aimp-1&kid=k1&exp=1796313600&sig=2b968790c6ee41d77199af737c2a8f111ecba6a2e1fb2b0e4e569427c2d2b241"
	keys, err := ParseKeys("k1:ZnJlcWNhcC10ZXN0LXZlY3Rvci1rZXk=")
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Unix(1796313600-3600, 0) }
	v := &Verifier{Keys: keys, MaxAge: map[string]time.Duration{"": 24 * time.Hour}, Now: now}
	var se *Error
	if _, err := v.Verify("win", v1); !errors.As(err, &se) || se.Reason != Version1 {
		t.Errorf("a version 1 URL without AcceptV1: %v, want %s", err, Version1)
	}
	v.AcceptV1 = true
	for _, event := range []string{"win", "imp"} {
		got, err := v.Verify(event, v1)
		if err != nil || got.Version != 1 || got.Params.Get("cid") != "42" {
			t.Errorf("a version 1 URL with AcceptV1 on /%s: %+v %v", event, got, err)
		}
	}
	if _, err := v.Verify("win", strings.Replace(v1, "&kid=", "&v=3&kid=", 1)); !errors.As(err, &se) || se.Reason != Malformed {
		t.Errorf("v=3: %v, want %s", err, Malformed)
	}
}

func TestVerifyRefusesWithAReason(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	keys := Keys{"k1": secret, "k2": []byte("another secret of 16+ bytes")}
	now := time.Unix(1_800_000_000, 0)
	v := &Verifier{Keys: keys, MaxAge: map[string]time.Duration{"": 24 * time.Hour}, Now: func() time.Time { return now }}
	good := SignQuery("k1", secret, now.Add(time.Hour), "win", []Param{{"cid", "42"}, {"device", "a b/ü"}, {"eid", "r:1"}})
	if _, err := v.Verify("win", good+"&price=${AUCTION_PRICE}&cid=99"); err != nil {
		t.Fatalf("a signed URL with parameters appended after sig: %v", err)
	}
	got, _ := v.Verify("win", good+"&cid=99")
	if signed := got.Params; signed["cid"][0] != "42" || len(signed["cid"]) != 1 {
		t.Errorf("a cid after sig changed the signed cid: %v", got.Params)
	}
	for name, tt := range map[string]struct{ query, reason string }{
		"no sig":         {strings.Split(good, "&sig=")[0], Missing},
		"no kid":         {SignQuery("", secret, now.Add(time.Hour), "win", []Param{{"cid", "42"}}), Missing},
		"unknown kid":    {SignQuery("k9", secret, now.Add(time.Hour), "win", []Param{{"cid", "42"}}), UnknownKid},
		"other key":      {SignQuery("k2", secret, now.Add(time.Hour), "win", []Param{{"cid", "42"}}), BadSig},
		"tampered value": {strings.Replace(good, "cid=42", "cid=43", 1), BadSig},
		"added before":   {"cid=7&" + good, BadSig},
		"expired":        {SignQuery("k1", secret, now.Add(-time.Second), "win", []Param{{"cid", "42"}}), Expired},
		"exp now":        {SignQuery("k1", secret, now, "win", []Param{{"cid", "42"}}), Expired},
		"too far":        {SignQuery("k1", secret, now.Add(25*time.Hour), "win", []Param{{"cid", "42"}}), TooFar},
		"bad escape":     {"cid=4%zz&" + good, Malformed},
		"exp not a time": {"cid=42&v=2&kid=k1&exp=soon&sig=" + Sum(secret, "win\ncid=42&exp=soon&kid=k1&v=2"), Malformed},
		"other event":    {SignQuery("k1", secret, now.Add(time.Hour), "imp", []Param{{"cid", "42"}}), BadSig},
		"version 1":      {"cid=42&kid=k1&exp=1800003600&sig=" + Sum(secret, "cid=42&exp=1800003600&kid=k1"), Version1},
		"v twice":        {"v=2&" + good, Malformed},
		"kid twice":      {"kid=k1&" + good, Malformed},
	} {
		_, err := v.Verify("win", tt.query)
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
	f.Add(SignQuery("k1", secret, now.Add(time.Hour), "win", []Param{{"cid", "42"}, {"device", "d"}}))
	f.Add("cid=42&sig=00&kid=k1")
	f.Add("%zz=1&sig=")
	f.Add("v=2&kid=k1&exp=1800003600&sig=" + Sum(secret, "win\nexp=1800003600&kid=k1&v=2") + "&x=${Y}")
	v := &Verifier{Keys: Keys{"k1": secret}, MaxAge: map[string]time.Duration{"": 24 * time.Hour}, Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, q string) {
		got, err := v.Verify("win", q)
		var se *Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%q: an error without a reason: %v", q, err)
		}
		if err == nil && (got.KeyID != "k1" || got.Params.Has("sig") || got.Params.Has("kid") || got.Version != 2) {
			t.Fatalf("%q verified with %+v", q, got)
		}
	})
}
