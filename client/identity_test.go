package client_test

import (
	"strings"
	"testing"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/ids"
)

// The ip_ua identity is the same for the same person under one key, another
// under another key or for another user agent, an IPv6 household's /64 is
// one identity, and neither the address nor the agent shows in it.
func TestIPUAIsAKeyedHash(t *testing.T) {
	k1, k2 := []byte("operator-key-1"), []byte("operator-key-2")
	ua := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)"
	a := client.IPUA(k1, "203.0.113.7", ua)
	if a == "" || !ids.ValidID(a) || strings.Contains(a, "203") || strings.Contains(a, "iPhone") {
		t.Fatalf("IPUA = %q: want a valid id that shows neither the address nor the agent", a)
	}
	for name, tt := range map[string]struct {
		got  string
		same bool
	}{
		"the same request":       {client.IPUA(k1, " 203.0.113.7 ", ua+" "), true},
		"an IPv4-mapped address": {client.IPUA(k1, "::ffff:203.0.113.7", ua), true},
		"another key":            {client.IPUA(k2, "203.0.113.7", ua), false},
		"another agent":          {client.IPUA(k1, "203.0.113.7", ua+" Safari"), false},
		"another address":        {client.IPUA(k1, "203.0.113.8", ua), false},
		"one IPv6 /64":           {client.IPUA(k1, "2001:db8:1:2::1", ua), false},
	} {
		if (tt.got == a) != tt.same {
			t.Errorf("%s: %q vs %q, want same %v", name, tt.got, a, tt.same)
		}
	}
	if x, y := client.IPUA(k1, "2001:db8:1:2::1", ua), client.IPUA(k1, "2001:db8:1:2:ffff::9", ua); x != y || x == "" {
		t.Errorf("two addresses of one /64: %q, %q, want one id", x, y)
	}
	if client.IPUA(k1, "not an address", ua) != "" || client.IPUA(nil, "203.0.113.7", ua) != "" {
		t.Error("IPUA of a bad address or without a key is not empty")
	}
}
