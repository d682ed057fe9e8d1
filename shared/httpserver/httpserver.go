// Package httpserver runs an http.Server on a listener opened up front, so
// a bad address fails start-up with the variable's name, and shuts it down
// gracefully.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Server is one listening http.Server.
type Server struct {
	srv  *http.Server
	addr string
	errc chan error
}

// Limits bound what one client may send and how long it may hold a
// connection.
type Limits struct {
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing the answer, from the end of the headers.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers.
	MaxHeaderBytes int
}

// Internal are the limits of internal listeners: generous enough for a
// 60 s CPU profile from /debug/pprof.
var Internal = Limits{ReadTimeout: 15 * time.Second, WriteTimeout: 70 * time.Second, MaxHeaderBytes: 64 << 10}

// API are the limits of an internal API without profiles (the counter's
// API port): a request, a batch of the largest size included, is read and
// answered in well under these; a client that stops reading its answer is
// cut off by WriteTimeout.
var API = Limits{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}

// Public are the limits of the listener exchanges call: a notice is a
// small request answered at once.
var Public = Limits{ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, MaxHeaderBytes: 16 << 10}

// readHeaderTimeout bounds reading a request's headers (HTTP/1.1), and
// one frame or header block (HTTP/2).
const readHeaderTimeout = 5 * time.Second

// maxStreams is how many requests one HTTP/2 connection may have open.
const maxStreams = 100

// Listen opens addr (named by variable in errors) and serves h on it with
// the Internal limits.
func Listen(addr, variable string, h http.Handler) (*Server, error) {
	return ListenWith(addr, variable, h, Internal)
}

// ListenWith is Listen with the given limits.
func ListenWith(addr, variable string, h http.Handler, l Limits) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", variable, err)
	}
	return serve(ln, h, l, readHeaderTimeout), nil
}

// serve serves h on ln with the limits l and the header timeout header.
func serve(ln net.Listener, h http.Handler, l Limits, header time.Duration) *Server {
	// HTTP/2 without TLS (h2c) as well as HTTP/1.1: gRPC clients inside
	// the network speak it.
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	// HTTP/2 connections are bounded as HTTP/1.1 ones are: a frame (and a
	// request's header block) must arrive within the header timeout of
	// its first byte, each stream's request within ReadTimeout, a
	// connection without streams goes after IdleTimeout, a silent one is
	// pinged and closed.
	ln = frameListener{Listener: ln, within: header}
	s := &Server{
		srv: &http.Server{Handler: h, ReadHeaderTimeout: header, IdleTimeout: 2 * time.Minute, Protocols: &protocols,
			ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
			HTTP2: &http.HTTP2Config{MaxConcurrentStreams: maxStreams, SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second}},
		addr: ln.Addr().String(),
		errc: make(chan error, 1),
	}
	go func() {
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.errc <- err
		}
	}()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Err delivers an error if the server stops serving on its own.
func (s *Server) Err() <-chan error { return s.errc }

// Shutdown stops accepting connections and waits up to timeout for
// in-flight requests to finish.
func (s *Server) Shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Close stops the server at once.
func (s *Server) Close() { _ = s.srv.Close() }
