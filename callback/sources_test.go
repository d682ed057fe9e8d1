package main

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestSourceIsTheClientBehindTrustedProxies(t *testing.T) {
	s, err := parseSourceLimit("10/1s", "10.0.0.0/8, ::1/128")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		remote, xff, want string
	}{
		{"203.0.113.7:5000", "", "203.0.113.7"},
		{"203.0.113.7:5000", "198.51.100.1", "203.0.113.7"}, // an untrusted client cannot name another
		{"10.0.0.5:5000", "203.0.113.7", "203.0.113.7"},
		{"10.0.0.5:5000", "203.0.113.7, 10.0.0.9", "203.0.113.7"},
		{"10.0.0.5:5000", "1.2.3.4, 203.0.113.7", "203.0.113.7"}, // what the client prepended is not believed
		{"[::1]:5000", "2001:db8::1", "2001:db8::1"},
		{"10.0.0.5:5000", "", "10.0.0.5"},
	} {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := s.source(r); got != netip.MustParseAddr(tt.want) {
			t.Errorf("remote %s, X-Forwarded-For %q: source %s, want %s", tt.remote, tt.xff, got, tt.want)
		}
	}
	for _, bad := range [][2]string{{"10", ""}, {"0/1s", ""}, {"5/soon", ""}, {"5/1s", "10.0.0.0/33"}} {
		if _, err := parseSourceLimit(bad[0], bad[1]); err == nil {
			t.Errorf("parseSourceLimit(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestSourceLimitIsPerSource(t *testing.T) {
	s, err := parseSourceLimit("3/1m", "")
	if err != nil {
		t.Fatal(err)
	}
	a := &http.Request{RemoteAddr: "203.0.113.7:1"}
	b := &http.Request{RemoteAddr: "203.0.113.8:1"}
	for i := range 3 {
		if ok, _ := s.allow(a); !ok {
			t.Fatalf("notice %d of a burst of 3 refused", i)
		}
	}
	if ok, wait := s.allow(a); ok || wait < 10e9 {
		t.Errorf("the 4th notice within a minute: allowed %v, wait %s; want refused for about 20 s", ok, wait)
	}
	if ok, _ := s.allow(b); !ok {
		t.Error("another source was refused")
	}
}
