package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// everyKind is one write of every kind of counter, on many subjects, so
// that a cluster's three masters all hold some of each.
func everyKind(n int) []counting.Item {
	var its []counting.Item
	for i := range n {
		id := fmt.Sprintf("subject-%d", i)
		campaign := counting.Scope{Campaign: "7", Event: "win"}
		subj := counting.Subject{Dim: "device", ID: id}
		eid := "e-" + id
		its = append(its,
			counting.Item{Scope: campaign, Subject: subj, Spec: counting.Spec{Kind: counting.Day, Span: 1}, Hits: 1, EventID: eid},
			counting.Item{Scope: campaign, Subject: subj, Spec: counting.Spec{Kind: counting.Hours, Span: 3}, Hits: 1, EventID: eid},
			counting.Item{Scope: campaign, Subject: subj, Spec: counting.Spec{Kind: counting.Sliding, Span: 600}, Hits: 1, EventID: eid},
			counting.Item{Scope: counting.Scope{Business: 9}, Subject: counting.Subject{ID: id}, Spec: counting.Spec{Kind: counting.Seconds, Span: 60}, Hits: 1},
		)
		for _, k := range limiterKinds {
			its = append(its, counting.Item{Scope: counting.Scope{Policy: "p" + string(k)}, Subject: counting.Subject{ID: id},
				Spec: counting.Spec{Kind: k, Limit: 10, PeriodMs: 60_000}, Hits: 1})
		}
	}
	return its
}

// On a cluster, every key of every kind lives on the master that serves
// its hash tag's slot, all three masters hold keys of every kind, and a
// write batch reaches each master once per script run it owns: no MOVED,
// no retries, nothing sent to a node that does not serve it.
func TestEveryKeyLandsOnTheNodeOfItsTag(t *testing.T) {
	srv := redistest.StartCluster(t)
	st, _ := testStore(t, srv, newClock(time.Now()))
	its := everyKind(60)
	loadLibrary(t, srv)
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	for i, r := range st.Write(context.Background(), its) {
		if r.Code != 0 {
			t.Fatalf("item %d (%s): %d %s", i, its[i].Spec.Kind, r.Code, r.Msg)
		}
	}
	prefixes := []string{"freq:", "hfreq:", "sfreq:", "gfreq:", "dedup:", "rl:"}
	owners := srv.SlotOwners(t)
	for m, addr := range srv.Masters() {
		node := srv.Node(addr)
		seen := map[string]int{}
		for _, key := range node.Keys(t, "*") {
			if slot := redistest.KeySlot(key); !slices.ContainsFunc(owners[addr], func(r [2]int) bool { return slot >= r[0] && slot <= r[1] }) {
				t.Errorf("master %d holds %s, whose tag hashes to slot %d it does not serve", m, key, slot)
			}
			for _, p := range prefixes {
				if strings.HasPrefix(key, p) {
					seen[p]++
				}
			}
		}
		for _, p := range prefixes {
			if seen[p] == 0 {
				t.Errorf("master %d holds no %s key: %v", m, p, seen)
			}
		}
		for _, line := range node.OnMasters(t, "INFO", "errorstats") {
			if strings.Contains(line, "MOVED") || strings.Contains(line, "ASK") {
				t.Errorf("master %d answered redirects: %s", m, line)
			}
		}
	}
	// One run per script: count.lua once per campaign tag (day, hours and
	// the event id together), sliding.lua and the limiter script once per
	// item, over the masters that own them.
	want := int64(60 * (1 + 1 + 1 + len(limiterKinds)))
	got := srv.Calls(t, "evalsha")
	for m, n := range srv.Calls(t, "fcall") {
		got[m] += n
	}
	var sum int64
	for m, n := range got {
		if n == 0 {
			t.Errorf("master %d ran no script", m)
		}
		sum += n
	}
	if sum != want {
		t.Errorf("EVALSHA and FCALL calls %v, sum %d, want %d", got, sum, want)
	}
}

// COUNTER_READ_FROM=replica sends every read to the replicas (the masters
// serve none), client-side caching keeps working there (a write on the
// master invalidates the copy read from the replica), and writes still go
// to the masters.
func TestReadsFromReplicas(t *testing.T) {
	srv := redistest.StartCluster(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_READ_FROM=replica")
	ctx := context.Background()
	var qs []Query
	for i := range 30 {
		q := Query{CID: "5", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: fmt.Sprintf("d%d", i)}, {Name: "bundle", ID: fmt.Sprintf("b%d", i)}}}
		mustIncr(t, st, q)
		qs = append(qs, q)
	}
	// Replication is asynchronous: wait until the replicas have every write.
	visible := func(want int64) bool {
		for _, r := range st.Read(ctx, qs) {
			if r.Err != nil || r.Counts[0].Day != want || r.Counts[1].Windows[0] != want {
				return false
			}
		}
		return true
	}
	waitFor(t, 5*time.Second, func() bool { return visible(1) })
	for _, addr := range srv.Nodes() {
		srv.Node(addr).OnMasters(t, "CONFIG", "RESETSTAT")
	}
	if !visible(1) {
		t.Fatal("counts changed")
	}
	calls := func(addrs []string) (n int64) {
		for _, a := range addrs {
			node := srv.Node(a)
			n += node.TotalCalls(t, "get") + node.TotalCalls(t, "hgetall")
		}
		return n
	}
	if m, r := calls(srv.Masters()), calls(srv.Replicas()); m != 0 || r == 0 {
		t.Errorf("reads reached the masters %d times and the replicas %d times, want only replicas", m, r)
	}
	// The bundles are cached: read again, they stay in process memory.
	before := calls(srv.Replicas())
	bundles := make([]Query, len(qs))
	for i, q := range qs {
		bundles[i] = Query{CID: q.CID, Event: q.Event, Windows: q.Windows, Dims: q.Dims[1:]}
	}
	st.Read(ctx, bundles)
	if after := calls(srv.Replicas()); after != before {
		t.Errorf("cached bundles were read from the replicas again: %d calls, then %d", before, after)
	}
	for _, q := range bundles {
		mustIncr(t, st, q)
	}
	waitFor(t, 5*time.Second, func() bool {
		for _, r := range st.Read(ctx, bundles) {
			if r.Err != nil || r.Counts[0].Day != 2 {
				return false
			}
		}
		return true
	})
	// The scripts that counted ran on the masters; no read did.
	for _, addr := range srv.Masters() {
		if n := srv.Node(addr).TotalCalls(t, "get") + srv.Node(addr).TotalCalls(t, "hgetall"); n != 0 {
			t.Errorf("reads reached master %s %d times", addr, n)
		}
	}
}

func TestReadFromReplicaNeedsACluster(t *testing.T) {
	srv := redistest.StartSingle(t)
	s := testSettings(t, srv.URL(), "COUNTER_READ_FROM=replica")
	if _, err := openRedis(s, newRedisHooks(s)); err == nil || !strings.Contains(err.Error(), "not a cluster") {
		t.Errorf("replica reads on one server: %v, want an error saying it is not a cluster", err)
	}
	if _, err := loadSettings([]string{"COUNTER_READ_FROM=replicas"}); err == nil || !strings.Contains(err.Error(), "COUNTER_READ_FROM") {
		t.Errorf("COUNTER_READ_FROM=replicas: %v", err)
	}
}

// BenchmarkReplicaVisibility is how long after a write on a master is
// acknowledged it is readable on its replica (COUNTER_READ_FROM=replica):
// each iteration counts one event, then reads the replica until it shows
// it. It reports the median and the 99th percentile.
func BenchmarkReplicaVisibility(b *testing.B) {
	srv := redistest.StartCluster(b)
	clk := newClock(time.Now())
	writer, _ := testStore(b, srv, clk)
	reader, _ := testStore(b, srv, clk, "COUNTER_READ_FROM=replica", "COUNTER_HOT_KEY_RATE=0")
	ctx := context.Background()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		q := Query{CID: "1", Event: "win", Dims: []Dim{{Name: "device", ID: fmt.Sprintf("vis-%d", i)}}}
		mustIncr(b, writer, q)
		start := time.Now() // the write is acknowledged
		for {
			r := reader.Read(ctx, []Query{q})[0]
			if r.Err == nil && r.Counts[0].Day == 1 {
				break
			}
			if time.Since(start) > 5*time.Second {
				b.Fatalf("write %d not on the replica after 5 s", i)
			}
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds()), "p99-µs")
}
