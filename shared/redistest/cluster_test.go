package redistest_test

import (
	"strconv"
	"strings"
	"testing"

	"os/exec"

	"github.com/freqcap/freqcap/shared/redistest"
)

// A test cluster serves every slot from 3 masters, each with a replica in
// sync, and its URL names every master.
func TestClusterServesEverySlotWithReplicas(t *testing.T) {
	c := redistest.StartCluster(t)
	if n := len(c.Nodes()); n != 6 {
		t.Fatalf("%d nodes, want 6", n)
	}
	for _, m := range c.Masters() {
		if !strings.Contains(c.URL(), m) {
			t.Errorf("URL %s does not name master %s", c.URL(), m)
		}
	}
	// KeySlot hashes as Redis does, hash tags included.
	host, port, _ := strings.Cut(c.Addr, ":")
	for _, key := range []string{"a", "freq:{win:device:7:abc}", "x{}y", "{}{b}", "rl:{p:api:user%3A1}:fixed_window:10:1000", "{only}"} {
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "CLUSTER", "KEYSLOT", key).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := redistest.KeySlot(key), strings.TrimSpace(string(out)); strconv.Itoa(got) != want {
			t.Errorf("KeySlot(%q) = %d, Redis says %s", key, got, want)
		}
	}
	for _, addr := range c.Nodes() {
		host, port, _ := strings.Cut(addr, ":")
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "CLUSTER", "INFO").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:6", "cluster_size:3"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("node %s: CLUSTER INFO lacks %s:\n%s", addr, want, out)
			}
		}
	}
}
