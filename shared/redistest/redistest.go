// Package redistest starts real redis-server processes for tests. It never
// skips: a machine without redis-server fails the test and says what to
// install.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process owned by a test.
type Server struct {
	t    testing.TB
	Addr string
	dir  string
	port int
	args []string // given to StartWith, after the defaults
	cmd  *exec.Cmd
}

// Start launches redis-server on a free loopback port, waits until it
// answers, and stops it when the test ends.
func Start(t testing.TB) *Server { return StartWith(t) }

// StartWith is Start with more redis-server arguments after the defaults
// (a later --option wins), e.g. the ACL and limits of a deployment.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	s, err := launch(t, t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(s.dir, "redis.log")); err == nil {
				t.Logf("redis-server log:\n%s", b)
			}
		}
	})
	return s
}

// Launch starts a server outside any one test, for TestMain; Close it when
// the run ends.
func Launch() (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s, err := launch(nil, dir)
	if err != nil {
		os.RemoveAll(dir)
	}
	return s, err
}

// Close stops a launched server and removes its files.
func (s *Server) Close() {
	s.Kill()
	os.RemoveAll(s.dir)
}

func launch(t testing.TB, dir string, args ...string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &Server{t: t, dir: dir, port: port, args: args, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	return s, s.start()
}

// URL is the server's address in rueidis URL form.
func (s *Server) URL() string { return "redis://" + s.Addr }

func (s *Server) start() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server not found in PATH: install it (Debian: apt-get install -y redis-server; macOS: brew install redis): %w", err)
	}
	s.cmd = exec.Command(bin, append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--loglevel", "warning"}, s.args...)...)
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redis log: %w", err)
	}
	defer logf.Close()
	s.cmd.Stdout = logf
	s.cmd.Stderr = logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	if err := waitListening(s.Addr, 5*time.Second); err != nil {
		return fmt.Errorf("redis-server on %s: %w", s.Addr, err)
	}
	return nil
}

// Pause stops the process with SIGSTOP: connections stay open, nothing answers.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal redis-server: %v", err)
	}
}

// Kill ends the process at once; its data is gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a new, empty server on the same port after Kill.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitListening(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %s: %w", within, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
