package httpserver

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testConn serves h on loopback with the limits l and the header timeout
// header, short enough for a test to go past them, and dials it.
func testConn(t testing.TB, h http.Handler, l Limits, header time.Duration) (net.Conn, *bufio.Reader) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serve(ln, h, l, header)
	t.Cleanup(s.Close)
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, bufio.NewReader(conn)
}

// get sends a GET on conn and reads its answer.
func get(t *testing.T, conn net.Conn, br *bufio.Reader) string {
	t.Helper()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The connection's deadlines are kept lazily (a later one is given to the
// socket only when an earlier one fires), and each still holds exactly:
// a handler that runs past the header and read timeouts keeps its request
// and its connection, a connection idle past them serves its next request,
// a body sent slowly is cut at the read timeout (not the header timeout),
// and an answer the client does not read is cut at the write timeout.
func TestDeadlinesHoldAsNetHTTPSetsThem(t *testing.T) {
	const header, read, write = 200 * time.Millisecond, 600 * time.Millisecond, 1500 * time.Millisecond
	limits := Limits{ReadTimeout: read, WriteTimeout: write, MaxHeaderBytes: 4 << 10}

	t.Run("a handler past the read timeouts keeps its request", func(t *testing.T) {
		t.Parallel()
		conn, br := testConn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(read + 200*time.Millisecond)
			if err := r.Context().Err(); err != nil {
				_, _ = io.WriteString(w, err.Error())
				return
			}
			_, _ = io.WriteString(w, "done")
		}), limits, header)
		for i := range 2 {
			if got := get(t, conn, br); got != "done" {
				t.Fatalf("request %d answered %q", i, got)
			}
			time.Sleep(read) // idle past the header and read timeouts
		}
	})

	t.Run("a slow body is cut at the read timeout", func(t *testing.T) {
		t.Parallel()
		cut := make(chan time.Duration, 1)
		conn, _ := testConn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			_, err := io.ReadAll(r.Body)
			if err != nil {
				cut <- time.Since(start)
			}
			close(cut)
		}), limits, header)
		go func() { _, _ = io.Copy(io.Discard, conn) }()
		if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		for range 40 { // a byte every 50 ms: 2 s, past the read timeout
			if _, err := conn.Write([]byte{'x'}); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		took, ok := <-cut
		if !ok {
			t.Fatal("the slow body was read whole")
		}
		// The whole request's deadline runs from its first byte, a moment
		// before the handler starts.
		if took < read-header/2 || took > read+500*time.Millisecond {
			t.Fatalf("cut %s into the body, want at the read timeout (%s), not the header timeout (%s)", took, read, header)
		}
	})

	t.Run("an answer not read is cut at the write timeout", func(t *testing.T) {
		t.Parallel()
		cut := make(chan time.Duration, 2)
		conn, br := testConn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/" {
				_, _ = io.WriteString(w, "small")
				return
			}
			start, chunk := time.Now(), []byte(strings.Repeat("x", 64<<10))
			for {
				if _, err := w.Write(chunk); err != nil {
					cut <- time.Since(start)
					return
				}
			}
		}), limits, header)
		// The first answer's write deadline passes while the connection
		// idles; the second answer gets its own whole.
		if got := get(t, conn, br); got != "small" {
			t.Fatalf("answered %q", got)
		}
		time.Sleep(write + 100*time.Millisecond)
		if _, err := io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case took := <-cut:
			if took < write-300*time.Millisecond || took > write+time.Second {
				t.Fatalf("the unread answer was cut after %s, want at the write timeout (%s)", took, write)
			}
		case <-time.After(write + 5*time.Second):
			t.Fatal("the unread answer was never cut")
		}
	})
}

// A lazy deadline gives the socket a later deadline only once the earlier
// one fires, and an operation goes on until the deadline asked for: a read
// waits for data past an earlier deadline, a write goes on with what is
// left, a deadline in the past stops a blocked read at once, and none
// after it lets the next read wait as long as it must.
func TestLazyDeadlineHoldsTheOneAskedFor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := &frameConn{Conn: raw, within: time.Second}
	c.plain.Store(true)
	defer c.Close()

	// Read: 100 ms asked, then 1 s: the data at 300 ms is read.
	now := time.Now()
	_ = c.SetReadDeadline(now.Add(100 * time.Millisecond))
	_ = c.SetReadDeadline(now.Add(time.Second))
	time.AfterFunc(300*time.Millisecond, func() { _, _ = client.Write([]byte("a")) })
	buf := make([]byte, 8)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "a" {
		t.Fatalf("read %q, %v; want the byte sent before the later deadline", buf[:n], err)
	}
	// Nothing comes: the read fails at 400 ms, not before.
	now = time.Now()
	_ = c.SetReadDeadline(now.Add(100 * time.Millisecond))
	_ = c.SetReadDeadline(now.Add(400 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(now) < 400*time.Millisecond {
		t.Fatalf("read failed after %s with %v, want a timeout at 400 ms", time.Since(now), err)
	}

	// A past deadline stops a blocked read at once; none after it lets
	// the next read wait past every deadline set before.
	_ = c.SetReadDeadline(time.Time{})
	stopped := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		stopped <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = c.SetReadDeadline(time.Unix(1, 0))
	if err := <-stopped; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a past deadline left the read with %v", err)
	}
	_ = c.SetReadDeadline(time.Time{})
	time.AfterFunc(200*time.Millisecond, func() { _, _ = client.Write([]byte("b")) })
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "b" {
		t.Fatalf("read %q, %v after the deadline was cleared", buf[:n], err)
	}

	// Write: 100 ms asked, then 3 s; the client reads from 300 ms on.
	// The write, cut short by the earlier deadline, goes on whole.
	big := make([]byte, 32<<20)
	now = time.Now()
	_ = c.SetWriteDeadline(now.Add(100 * time.Millisecond))
	_ = c.SetWriteDeadline(now.Add(3 * time.Second))
	time.AfterFunc(300*time.Millisecond, func() { _, _ = io.Copy(io.Discard, client) })
	if n, err := c.Write(big); err != nil || n != len(big) {
		t.Fatalf("wrote %d of %d: %v", n, len(big), err)
	}
}

// A body refused unread (over its limit) is answered while the client is
// still sending it, and the answer ends with the server's end of writing:
// net/http shuts the connection's writing side (CloseWrite, which the
// listener's connections must keep) and waits before it closes; without it
// the client learnt the answer was all only when the connection closed,
// half a second later.
func TestARefusedBodyIsAnsweredBeforeTheConnectionCloses(t *testing.T) {
	for i := range 5 {
		conn, br := testConn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<10)); err != nil {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
				return
			}
		}), API, readHeaderTimeout)
		body := 64 << 20
		go func() {
			_, _ = io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(body)+"\r\n\r\n")
			chunk := make([]byte, 64<<10)
			for sent := 0; sent < body; sent += len(chunk) {
				if _, err := conn.Write(chunk); err != nil {
					return
				}
			}
		}()
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: no answer: %v", i, err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("request %d: answered %d %q, %v; want 413 read whole", i, res.StatusCode, b, err)
		}
		// Then the server's side ends at once, not when net/http stops
		// waiting (half a second) and closes.
		start := time.Now()
		if _, err := br.ReadByte(); err != io.EOF || time.Since(start) > 400*time.Millisecond {
			t.Fatalf("request %d: %v %s after the answer; want the server's end of writing (EOF) at once", i, err, time.Since(start))
		}
	}
}
