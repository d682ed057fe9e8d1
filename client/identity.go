package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/netip"
	"strings"
)

// IPUA is the ip_ua identity of a request without a device id: a keyed
// hash (HMAC-SHA256 with key, the operator's secret, rotated as it sees
// fit) of the client's IP address and user agent, so every service that
// holds the key names the same person alike, and no IP address or user
// agent is ever stored. An IPv6 address counts by its /64 (one household's
// prefix); the user agent is trimmed. A key's rotation starts ip_ua caps
// over: ids made with the old key are never met again. It answers "" for
// an address that does not parse or an empty key.
func IPUA(key []byte, ip, userAgent string) string {
	addr, err := netip.ParseAddr(strings.TrimSpace(ip))
	if err != nil || len(key) == 0 {
		return ""
	}
	addr = addr.Unmap()
	if addr.Is6() {
		addr = netip.PrefixFrom(addr, 64).Masked().Addr()
	}
	m := hmac.New(sha256.New, key)
	m.Write(addr.AsSlice())
	m.Write([]byte{0})
	m.Write([]byte(strings.TrimSpace(userAgent)))
	return "iu1." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}
