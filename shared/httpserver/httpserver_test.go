package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A client that sends its request a byte at a time is cut off by the
// header timeout, over HTTP/1.1 and over HTTP/2 without TLS alike: a
// HEADERS frame trickled, or a header block trickled as CONTINUATION
// frames each on time. A prompt h2c request is served, and so is one on
// the same connection after the connection sat idle past the timeout.
func TestSlowClientsAreCutOffOverEveryProtocol(t *testing.T) {
	s, err := ListenWith("127.0.0.1:0", "TEST_ADDR", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto)
	}), Public)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)

	frame := func(typ, flags byte, payload []byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 1}, payload...)
	}
	// The preface, the client's SETTINGS and its acknowledgement of the
	// server's, as a well-behaved client would send them.
	settings := append([]byte(h2Preface), 0, 0, 0, 0x4, 0, 0, 0, 0, 0, 0, 0, 0, 0x4, 0x1, 0, 0, 0, 0)
	cases := map[string]struct {
		opening []byte // sent at once
		trickle []byte // then a byte every 200 ms
	}{
		"HTTP/1.1 request line": {nil, []byte("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + string(make([]byte, 200)))},
		"h2c HEADERS frame":     {append(settings, frame(frameHeaders, flagEndHeaders, make([]byte, 200))[:9]...), make([]byte, 200)},
		"h2c CONTINUATION frames": {append(settings, frame(frameHeaders, 0, []byte{0x82})...),
			func() []byte {
				var b []byte
				for range 40 {
					b = append(b, frame(frameContinuation, 0, []byte{0x84})...)
				}
				return b
			}()},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			closed := make(chan time.Duration, 1)
			go func() {
				_, _ = io.Copy(io.Discard, conn) // until the server closes it
				closed <- time.Since(start)
			}()
			if _, err := conn.Write(c.opening); err != nil {
				t.Fatal(err)
			}
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case took := <-closed:
					if took > readHeaderTimeout+2*time.Second {
						t.Errorf("closed after %s, want within the header timeout (%s)", took, readHeaderTimeout)
					}
					return
				case <-tick.C:
					if i >= len(c.trickle) {
						t.Fatalf("still open after trickling %d bytes over %s", i, time.Since(start))
					}
					_, _ = conn.Write(c.trickle[i : i+1])
				}
			}
		})
	}
	t.Run("h2c request after idling", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		tr := &http2.Transport{AllowHTTP: true}
		cc, err := tr.NewClientConn(conn)
		if err != nil {
			t.Fatal(err)
		}
		get := func() {
			t.Helper()
			req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(bufio.NewReader(resp.Body))
			resp.Body.Close()
			if string(b) != "HTTP/2.0" {
				t.Fatalf("answered %q", b)
			}
		}
		get()
		time.Sleep(readHeaderTimeout + time.Second) // idle between requests is not slow sending
		get()
	})
}
