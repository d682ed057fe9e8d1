// Package loopback finds free addresses on 127.0.0.1 for the services
// the bench commands start.
package loopback

import "net"

// FreeAddrs answers n distinct free loopback addresses: every listener
// stays open until all are chosen, so the kernel cannot hand one port out
// twice.
func FreeAddrs(n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}
