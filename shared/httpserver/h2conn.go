package httpserver

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// h2Preface opens every HTTP/2 connection without TLS (h2c with prior
// knowledge).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// frameListener gives every connection a frame-read deadline once it
// speaks HTTP/2. net/http bounds reading an HTTP/1.1 request (the header
// and whole-request timeouts), but clears the connection's deadlines when
// it hands an h2c connection to its HTTP/2 server, which then bounds only
// a connection with no stream (IdleTimeout): a client sending a HEADERS
// frame a byte a second held a connection for as long as it liked.
type frameListener struct {
	net.Listener
	within time.Duration
}

func (l frameListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &frameConn{Conn: c, within: l.within}, nil
}

// frameConn follows the HTTP/2 framing of what it reads (after the
// preface) and, whenever a frame has begun, or a header block (HEADERS
// and its CONTINUATION frames) is open, sets the read deadline to within
// after its first byte. Between frames it sets none, so an idle
// connection waits for its next request as the HTTP/2 server decides. A
// connection that does not open with the preface is HTTP/1.1 and left to
// net/http, its deadlines kept lazily (lazyDeadline).
type frameConn struct {
	net.Conn
	within time.Duration

	// plain: not HTTP/2, known from the first bytes. Such a connection
	// is left to net/http: its paths skip the lock.
	plain atomic.Bool

	// The deadlines net/http asks for and those the socket holds.
	rd, wd lazyDeadline

	mu       sync.Mutex
	seen     int // bytes of the preface read so far
	head     [9]byte
	headLen  int  // bytes of the current frame's header read
	left     int  // payload bytes of the current frame still to come
	inBlock  bool // a header block is open (no END_HEADERS yet)
	since    time.Time
	deadline time.Time // the frame deadline this conn set, zero when none
}

// HTTP/2 frame types and the flag that ends a header block.
const (
	frameHeaders      = 0x1
	frameContinuation = 0x9
	flagEndHeaders    = 0x4
)

func (c *frameConn) Read(p []byte) (int, error) {
	if c.plain.Load() {
		return c.rd.read(p, c.Conn.Read, c.Conn.SetReadDeadline)
	}
	c.mu.Lock()
	if !c.plain.Load() && c.seen == len(h2Preface) {
		var want time.Time
		if c.headLen > 0 || c.left > 0 || c.inBlock {
			want = c.since.Add(c.within)
		}
		if !want.Equal(c.deadline) {
			c.deadline = want
			_ = c.rd.pass(want, c.Conn.SetReadDeadline)
		}
	}
	c.mu.Unlock()
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.follow(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// follow advances the framing state over b.
func (c *frameConn) follow(b []byte) {
	for len(b) > 0 && !c.plain.Load() {
		switch {
		case c.seen < len(h2Preface):
			k := min(len(b), len(h2Preface)-c.seen)
			if string(b[:k]) != h2Preface[c.seen:c.seen+k] {
				c.plain.Store(true)
				return
			}
			c.seen += k
			b = b[k:]
		case c.left > 0:
			k := min(len(b), c.left)
			c.left -= k
			b = b[k:]
			if c.left == 0 && !c.inBlock {
				c.since = time.Time{}
			}
		default:
			if c.headLen == 0 && !c.inBlock {
				c.since = time.Now()
			}
			k := copy(c.head[c.headLen:], b)
			c.headLen += k
			b = b[k:]
			if c.headLen < len(c.head) {
				continue
			}
			c.headLen = 0
			c.left = int(c.head[0])<<16 | int(c.head[1])<<8 | int(c.head[2])
			switch typ, flags := c.head[3], c.head[4]; typ {
			case frameHeaders, frameContinuation:
				if !c.inBlock {
					c.since = time.Now()
				}
				c.inBlock = flags&flagEndHeaders == 0
			}
			if c.left == 0 && !c.inBlock {
				c.since = time.Time{}
			}
		}
	}
}

// SetReadDeadline passes net/http's deadlines through; while a frame is
// being read, the earlier of the two holds.
func (c *frameConn) SetReadDeadline(t time.Time) error {
	if c.plain.Load() {
		return c.rd.set(t, c.Conn.SetReadDeadline)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.deadline.IsZero() && (t.IsZero() || c.deadline.Before(t)) {
		t = c.deadline
	}
	return c.rd.pass(t, c.Conn.SetReadDeadline)
}

// Write writes p, within the write deadline last set.
func (c *frameConn) Write(p []byte) (int, error) {
	return c.wd.write(p, c.Conn.Write, c.Conn.SetWriteDeadline)
}

// SetWriteDeadline sets the write deadline, lazily.
func (c *frameConn) SetWriteDeadline(t time.Time) error {
	return c.wd.set(t, c.Conn.SetWriteDeadline)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *frameConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// lazyDeadline keeps one direction's deadline (read or write) of a
// connection the way net/http uses it: set several times a request (the
// idle connection's, the header's, the whole request's, none while the
// handler runs, a past one to stop its background read, the answer's),
// where each set moves a runtime timer. A deadline goes to the socket only
// when it is earlier than the one the socket holds, or the socket holds
// none or one that stops operations at once; a later one, or none, is only
// remembered. When the socket's earlier deadline fires, read and write see
// that the one asked for has not passed, give the socket that one and go
// on: an operation fails at the deadline asked for, never later, never
// earlier.
type lazyDeadline struct {
	mu    sync.Mutex
	want  time.Time // the deadline asked for, zero for none
	armed time.Time // the deadline the socket holds, zero for none
}

// longAgo: a deadline before it stops an operation at once (net/http's,
// to end a connection's background read, is the epoch's first second).
// No deadline computed from the clock is that early.
var longAgo = time.Unix(1<<30, 0)

// set asks for t, and gives it to the socket when the socket's own would
// let an operation run past t, or is one that stops operations at once.
// (A deadline the socket holds that has passed since is found by the next
// operation, as any earlier one is.)
func (d *lazyDeadline) set(t time.Time, arm func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = t
	if t.IsZero() || (!d.armed.IsZero() && !t.Before(d.armed) && !d.armed.Before(longAgo)) {
		return nil
	}
	d.armed = t
	return arm(t)
}

// pass gives the socket t now (HTTP/2 framing sets its deadlines exactly).
func (d *lazyDeadline) pass(t time.Time, arm func(time.Time) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want, d.armed = t, t
	return arm(t)
}

// read reads into p within the deadline asked for.
func (d *lazyDeadline) read(p []byte, read func([]byte) (int, error), arm func(time.Time) error) (int, error) {
	for {
		n, err := read(p)
		if n > 0 || !d.early(err, arm) {
			return n, err
		}
	}
}

// write writes all of p within the deadline asked for, going on with what
// is left when an earlier deadline the socket held cut it short.
func (d *lazyDeadline) write(p []byte, write func([]byte) (int, error), arm func(time.Time) error) (int, error) {
	n := 0
	for {
		k, err := write(p[n:])
		n += k
		if !d.early(err, arm) {
			return n, err
		}
	}
}

// early reports whether err is a timeout of an earlier deadline than the
// one asked for, and if so gives the socket the one asked for.
func (d *lazyDeadline) early(err error, arm func(time.Time) error) bool {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.want.IsZero() && !time.Now().Before(d.want) {
		return false
	}
	d.armed = d.want
	return arm(d.want) == nil
}

// CloseWrite shuts the writing side when the connection can (TCP): net/http
// does so after refusing a body it did not read, so that the client reads
// the answer before the connection closes.
func (c *frameConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
