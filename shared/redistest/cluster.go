package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clusterMasters is how many masters a test cluster has; each has one
// replica.
const clusterMasters = 3

// nodeTimeout is the test clusters' cluster-node-timeout: short, so a
// killed master's replica takes over within about a second.
const nodeTimeout = "1000"

// StartCluster starts a Redis Cluster of 3 masters and 3 replicas on free
// loopback ports (each node with args after the defaults), waits until
// every slot is served and every replica is in sync, and stops it when
// the test ends.
func StartCluster(t testing.TB, args ...string) *Server {
	t.Helper()
	s, err := launchCluster(t, t.TempDir(), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			for _, n := range s.nodes {
				if b, err := os.ReadFile(filepath.Join(n.dir, "redis.log")); err == nil && len(b) > 0 {
					t.Logf("redis-server %s log:\n%s", n.Addr, b)
				}
			}
		}
	})
	return s
}

// launchCluster starts a cluster, on other ports again when one was taken
// between choosing it and binding it (tests of other packages run at the
// same time).
func launchCluster(t testing.TB, dir string, args ...string) (*Server, error) {
	var err error
	for attempt := range 3 {
		var s *Server
		if s, err = tryCluster(t, filepath.Join(dir, "try"+strconv.Itoa(attempt)), args); err == nil {
			return s, nil
		}
		if s != nil {
			s.Kill()
		}
	}
	return nil, err
}

func tryCluster(t testing.TB, dir string, args []string) (*Server, error) {
	s := &Server{t: t, dir: dir, args: args}
	for i := range 2 * clusterMasters {
		nd := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return nil, err
		}
		n, err := newNode(t, nd, args)
		if err != nil {
			return nil, err
		}
		s.nodes = append(s.nodes, n)
	}
	s.Addr, s.port = s.nodes[0].Addr, s.nodes[0].port
	return s, s.startCluster()
}

func newNode(t testing.TB, dir string, args []string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return &Server{t: t, dir: dir, port: port, Addr: "127.0.0.1:" + strconv.Itoa(port),
		args: append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", nodeTimeout,
			// A replica syncs at once (the default waits 5 s for more replicas).
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"}, args...)}, nil
}

// startCluster starts every node empty and joins them: slots split evenly
// over the masters, each replica following its master.
func (s *Server) startCluster() error {
	for _, n := range s.nodes {
		_ = os.Remove(filepath.Join(n.dir, "nodes.conf")) // a restart is a new, empty cluster
		if err := n.start(); err != nil {
			s.Kill()
			return err
		}
	}
	masters := s.nodes[:clusterMasters]
	per := 16384 / clusterMasters
	for i, m := range masters {
		lo, hi := i*per, (i+1)*per-1
		if i == clusterMasters-1 {
			hi = 16383
		}
		if _, err := m.cli("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return err
		}
	}
	for _, n := range s.nodes[1:] {
		if _, err := s.nodes[0].cli("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(n.port)); err != nil {
			return err
		}
	}
	if err := s.waitNodes(func(n *Server) (bool, error) {
		out, err := n.cli("CLUSTER", "NODES")
		return strings.Count(strings.TrimSpace(out), "\n")+1 == len(s.nodes), err
	}); err != nil {
		return fmt.Errorf("cluster meet: %w", err)
	}
	if err := s.replicate(masters, per); err != nil {
		return err
	}
	if err := s.waitNodes(clusterReady(s.nodes)); err != nil {
		return fmt.Errorf("cluster not ready: %w", err)
	}
	return nil
}

// replicate makes each replica follow its master, and has each master
// replicate one write: Redis lists a replica in CLUSTER SLOTS only once it
// has replicated something.
func (s *Server) replicate(masters []*Server, per int) error {
	for i, r := range s.nodes[clusterMasters:] {
		id, err := masters[i].cli("CLUSTER", "MYID")
		if err != nil {
			return err
		}
		if _, err := r.cli("CLUSTER", "REPLICATE", strings.TrimSpace(id)); err != nil {
			return err
		}
	}
	for i, m := range masters {
		lo := i * per
		key := "redistest:{" + keyInSlot(lo, lo+per-1) + "}"
		if _, err := m.cli("SET", key, "1"); err != nil {
			return err
		}
		if _, err := m.cli("DEL", key); err != nil {
			return err
		}
	}
	return nil
}

// clusterReady holds on a node once it serves every node in CLUSTER
// SLOTS, its state is ok, it knows every replica (gossip: or a client that
// asks it for the slots would see masters alone) and its replication link
// is up.
func clusterReady(nodes []*Server) func(*Server) (bool, error) {
	return func(n *Server) (bool, error) {
		slots, err := n.cli("CLUSTER", "SLOTS")
		if err != nil {
			return false, err
		}
		for _, o := range nodes {
			if !strings.Contains(slots, "\n"+strconv.Itoa(o.port)+"\n") {
				return false, nil
			}
		}
		info, err := n.cli("CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false, err
		}
		out, err := n.cli("CLUSTER", "NODES")
		if err != nil || strings.Count(out, "slave") != clusterMasters {
			return false, err
		}
		repl, err := n.cli("INFO", "replication")
		if err != nil {
			return false, err
		}
		if strings.Contains(repl, "role:slave") {
			return strings.Contains(repl, "master_link_status:up"), nil
		}
		return strings.Contains(repl, "connected_slaves:1"), nil
	}
}

// waitNodes waits until ready holds on every node.
func (s *Server) waitNodes(ready func(*Server) (bool, error)) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		var last error
		for _, n := range s.nodes {
			ok, err := ready(n)
			if err != nil {
				last = err
			}
			if !ok {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after 30 s (last error: %v)", last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cli runs one redis-cli command against the node and returns its output.
func (s *Server) cli(args ...string) (string, error) {
	out, err := exec.Command("redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli -p %d %s: %v: %s", s.port, strings.Join(args, " "), err, out)
	}
	if strings.HasPrefix(string(out), "ERR") {
		return "", fmt.Errorf("redis-cli -p %d %s: %s", s.port, strings.Join(args, " "), out)
	}
	return string(out), nil
}

// Node is the single server at addr, one node of a cluster, for a test
// that stops or freezes one of them.
func (s *Server) Node(addr string) *Server {
	for _, n := range s.nodes {
		if n.Addr == addr {
			return n
		}
	}
	if s.Addr == addr && s.nodes == nil {
		return s
	}
	for _, n := range s.followers {
		if n.Addr == addr {
			return n
		}
	}
	s.t.Fatalf("redistest: no node %s", addr)
	return nil
}

// masterNodes are the nodes that serve slots: the server itself when it
// is not a cluster.
func (s *Server) masterNodes() []*Server {
	if s.nodes == nil {
		return []*Server{s}
	}
	return s.nodes[:clusterMasters]
}

// OnMasters runs one command on every master (the server itself when it
// is not a cluster), as redis-cli does, and returns their answers: for
// commands of a whole server, such as SCRIPT FLUSH or CONFIG RESETSTAT.
func (s *Server) OnMasters(t testing.TB, args ...string) []string {
	t.Helper()
	var out []string
	for _, n := range s.masterNodes() {
		o, err := n.cli(args...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// Calls is how many times each master ran command name (INFO
// commandstats, e.g. "evalsha"), in master order; one entry for a single
// server.
func (s *Server) Calls(t testing.TB, name string) []int64 {
	t.Helper()
	var out []int64
	for _, info := range s.OnMasters(t, "INFO", "commandstats") {
		var n int64
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+strings.ToLower(name)+":calls="); ok {
				n, _ = strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			}
		}
		out = append(out, n)
	}
	return out
}

// TotalCalls is Calls summed over the masters.
func (s *Server) TotalCalls(t testing.TB, name string) int64 {
	t.Helper()
	var sum int64
	for _, n := range s.Calls(t, name) {
		sum += n
	}
	return sum
}

// Keys are the keys matching pattern on every master (KEYS on each).
func (s *Server) Keys(t testing.TB, pattern string) []string {
	t.Helper()
	var out []string
	for _, o := range s.OnMasters(t, "KEYS", pattern) {
		for line := range strings.Lines(o) {
			if k := strings.TrimRight(line, "\r\n"); k != "" {
				out = append(out, k)
			}
		}
	}
	return out
}

// Replicas are the addresses of a cluster's replicas, in the order of
// their masters (nil for a single server).
func (s *Server) Replicas() []string {
	var out []string
	for _, n := range s.nodes[len(s.nodes)/2:] {
		out = append(out, n.Addr)
	}
	return out
}

// keyInSlot is a key whose Cluster slot is within lo..hi.
func keyInSlot(lo, hi int) string {
	for n := 0; ; n++ {
		k := strconv.Itoa(n)
		if s := KeySlot(k); s >= lo && s <= hi {
			return k
		}
	}
}

// crc16 is the CRC16-CCITT (XMODEM) that Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// MasterOf is the address of the master serving key's slot now.
func (s *Server) MasterOf(t testing.TB, key string) string {
	t.Helper()
	slot := KeySlot(key)
	for addr, ranges := range s.SlotOwners(t) {
		for _, r := range ranges {
			if slot >= r[0] && slot <= r[1] {
				return addr
			}
		}
	}
	t.Fatalf("redistest: no master serves %s", key)
	return ""
}

// SlotOwners are the slot ranges each master serves now, by address, as
// the first live node's CLUSTER NODES says (failed masters left out).
func (s *Server) SlotOwners(t testing.TB) map[string][][2]int {
	t.Helper()
	for _, n := range s.nodes {
		if n.cmd == nil {
			continue // killed
		}
		nodes, err := n.cli("CLUSTER", "NODES")
		if err != nil {
			t.Fatal(err)
		}
		owners := map[string][][2]int{}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			for _, r := range f[8:] {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				a, _ := strconv.Atoi(lo)
				b, _ := strconv.Atoi(hi)
				owners[addr] = append(owners[addr], [2]int{a, b})
			}
		}
		return owners
	}
	t.Fatal("redistest: no node is running")
	return nil
}

// KeySlot is key's Redis Cluster slot: the CRC16 of its hash tag (the part
// between the first '{' and the first '}' after it, when not empty), or of
// the whole key, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16([]byte(key)) % 16384)
}

// WaitServing waits until every node still running says the cluster is
// ok (after a failover: a replica has taken over the killed master's
// slots), and returns how long that took.
func (s *Server) WaitServing(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok := true
		for _, n := range s.nodes {
			if n.cmd == nil {
				continue
			}
			info, err := n.cli("CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
		}
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("redistest: cluster not serving %s after a node went", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// UsedMemory is the largest used_memory (INFO memory) among the masters,
// in bytes: what a maxmemory bound is checked against.
func (s *Server) UsedMemory(t testing.TB) int64 {
	t.Helper()
	var most int64
	for _, o := range s.OnMasters(t, "INFO", "memory") {
		for line := range strings.Lines(o) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("used_memory %q: %v", v, err)
				}
				most = max(most, n)
			}
		}
	}
	if most == 0 {
		t.Fatal("no used_memory in INFO memory")
	}
	return most
}
