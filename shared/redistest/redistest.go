// Package redistest starts real redis-server processes for tests. It never
// skips: a machine without redis-server fails the test and says what to
// install.
//
// With FREQCAP_TEST_REDIS=cluster in the environment, every Start,
// StartWith and Launch starts a Redis Cluster instead (3 masters and 3
// replicas, see StartCluster), so the same tests run against both; make
// test runs the suite both ways.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one redis-server process owned by a test, or a cluster of
// them: then Addr is the first master's, and Pause, Resume, Kill and
// Restart act on every node.
type Server struct {
	t    testing.TB
	Addr string
	dir  string
	port int
	args []string // given to StartWith, after the defaults
	cmd  *exec.Cmd
	// nodes are a cluster's, masters first, then their replicas in the
	// same order; nil for a single server.
	nodes []*Server
	// followers are the replicas StartReplica started for a single server.
	followers []*Server
}

// Clustered reports whether FREQCAP_TEST_REDIS=cluster asks for clusters.
func Clustered() bool { return os.Getenv("FREQCAP_TEST_REDIS") == "cluster" }

// Start launches redis-server on a free loopback port (a cluster when
// Clustered), waits until it answers, and stops it when the test ends.
func Start(t testing.TB) *Server { return StartWith(t) }

// StartWith is Start with more redis-server arguments after the defaults
// (a later --option wins), e.g. the ACL and limits of a deployment.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	if Clustered() {
		return StartCluster(t, args...)
	}
	return StartSingle(t, args...)
}

// StartSingle is StartWith for one redis-server, even when Clustered: for
// a test of a standalone deployment.
func StartSingle(t testing.TB, args ...string) *Server {
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

// StartReplica starts a replica of the single server s (redis-server
// --replicaof) and waits until s counts it as in sync; a cluster has its
// replicas already.
func (s *Server) StartReplica(t testing.TB) *Server {
	t.Helper()
	if s.nodes != nil {
		t.Fatal("redistest: StartReplica of a cluster: it has its replicas")
	}
	// The first sync starts at once instead of after 5 s.
	if _, err := s.cli("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		t.Fatal(err)
	}
	r := StartSingle(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.port))
	s.followers = append(s.followers, r)
	// In sync: a write on s (a PUBLISH, which leaves no key) reaches it,
	// as WAIT on the same connection says. Until the replica's first
	// acknowledgement, which may take a second, the master streams nothing.
	deadline := time.Now().Add(10 * time.Second)
	for {
		cmd := exec.Command("redis-cli", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port))
		cmd.Stdin = strings.NewReader("PUBLISH redistest:sync 1\nWAIT 1 100\n")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redistest: PUBLISH and WAIT on %s: %v: %s", s.Addr, err, out)
		}
		if f := strings.Fields(string(out)); len(f) == 2 && f[1] == "1" {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: replica %s of %s not in sync after 10s", r.Addr, s.Addr)
		}
	}
}

// ReplicaOf is a node in sync with the master at addr: one of a cluster's
// replicas, or one StartReplica started.
func (s *Server) ReplicaOf(t testing.TB, master string) *Server {
	t.Helper()
	addr, ok := s.replicaOf(t, master, "")
	if !ok {
		t.Fatalf("redistest: %s has no replica in sync", master)
	}
	return s.Node(addr)
}

// replicaOf reads master's INFO replication for a replica in sync (want,
// when not empty).
func (s *Server) replicaOf(t testing.TB, master, want string) (string, bool) {
	t.Helper()
	info, err := s.Node(master).cli("INFO", "replication")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		// slave0:ip=127.0.0.1,port=6380,state=online,offset=...,lag=0
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "state=online") {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		if addr := net.JoinHostPort(ip, port); want == "" || addr == want {
			return addr, true
		}
	}
	return "", false
}

// Launch starts a server outside any one test, for TestMain; Close it when
// the run ends.
func Launch() (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	launch := launch
	if Clustered() {
		launch = launchCluster
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
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{t: t, dir: dir, port: port, args: args, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	return s, s.start()
}

// URL is the server's address in rueidis URL form; a cluster's names
// every master, so a client finds it from any.
func (s *Server) URL() string {
	u := "redis://" + s.Addr
	for i, n := range s.Masters() {
		if i == 0 {
			u += "?addr=" + n
		} else if i > 0 {
			u += "&addr=" + n
		}
	}
	return u
}

// Masters are the addresses of a cluster's masters (nil for a single
// server), in slot order.
func (s *Server) Masters() []string {
	var out []string
	for _, n := range s.nodes[:len(s.nodes)/2] {
		out = append(out, n.Addr)
	}
	return out
}

// Nodes are the addresses of every node: the server itself, or a
// cluster's masters then replicas.
func (s *Server) Nodes() []string {
	if s.nodes == nil {
		return []string{s.Addr}
	}
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.Addr)
	}
	return out
}

func (s *Server) start() error {
	if s.nodes != nil {
		return s.startCluster()
	}
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
	for _, n := range s.nodes {
		n.signal(sig)
	}
	if s.nodes != nil {
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal redis-server: %v", err)
	}
}

// Kill ends the process at once; its data is gone.
func (s *Server) Kill() {
	for _, n := range s.nodes {
		n.Kill()
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts a new, empty server (or cluster) on the same ports after
// Kill.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// Port is FreePort outside any one test (for TestMain).
func Port() (int, error) { return freePort() }

// FreePort returns a loopback TCP port reserved for this test binary (see
// freePort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
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
