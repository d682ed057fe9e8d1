package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/redistest"
)

// replicasOf are one replica of every master: the cluster's, or one
// started for a single server.
func replicasOf(t *testing.T, srv *redistest.Server) []*redistest.Server {
	t.Helper()
	if !redistest.Clustered() {
		return []*redistest.Server{srv.StartReplica(t)}
	}
	var out []*redistest.Server
	for _, m := range srv.Masters() {
		out = append(out, srv.ReplicaOf(t, m))
	}
	return out
}

// TestWritesWaitForReplicas: with COUNTER_WRITE_REPLICAS=1 a write batch
// costs one WAIT per master it touched, and is answered as written only
// once the replicas have it; with the replicas frozen every item is 10001
// (written on the master, not replicated), and the caller's retry with the
// same event ids counts once.
func TestWritesWaitForReplicas(t *testing.T) {
	srv := redistest.Start(t)
	replicas := replicasOf(t, srv)
	clk := newClock(time.Now())
	st, _ := testStore(t, srv, clk, "COUNTER_WRITE_REPLICAS=1", "COUNTER_WRITE_TIMEOUT=1s")
	plain, _ := testStore(t, srv, clk)
	ctx := context.Background()
	batch := func(prefix string) []Query {
		var qs []Query
		for i := range 60 {
			qs = append(qs, Query{CID: "1", Event: "win", EID: fmt.Sprintf("%s-%d", prefix, i), Windows: []int{2},
				Dims: []Dim{{Name: "device", ID: fmt.Sprintf("%s-%d", prefix, i)}, {Name: "bundle", ID: "com.rep"}}})
		}
		return qs
	}
	write := func(s campaignStore, qs []Query) []error {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, errs := s.IncrBatch(wctx, qs)
		return errs
	}

	if errs := write(st, batch("warm")); errs[0] != nil { // loads the scripts on every master
		t.Fatal(errs[0])
	}
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	for i, err := range write(st, batch("up")) {
		if err != nil {
			t.Fatalf("write %d with the replicas up: %v", i, err)
		}
	}
	// One WAIT per master, after its share of the batch; no redirect.
	for m, n := range srv.Calls(t, "wait") {
		if n != 1 {
			t.Errorf("master %d ran %d WAIT for one batch, want 1", m, n)
		}
	}
	for _, info := range srv.OnMasters(t, "INFO", "errorstats") {
		if strings.Contains(info, "MOVED") || strings.Contains(info, "ASK") {
			t.Errorf("a replicated write was redirected: %s", info)
		}
	}
	if got := st.Read(ctx, batch("up")[:1])[0]; got.Err != nil || got.Counts[0].Day != 1 || got.Counts[1].Day != 120 {
		t.Fatalf("after the batch: %+v, want device 1 and bundle 120", got)
	}

	for _, r := range replicas {
		r.Pause()
	}
	frozen := batch("frozen")
	errs := write(st, frozen)
	unwaited := write(plain, batch("plain"))
	for _, r := range replicas {
		r.Resume()
	}
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "not replicated") {
			t.Fatalf("write %d with the replicas frozen: %v, want not replicated", i, err)
		}
	}
	for i, err := range unwaited {
		if err != nil {
			t.Fatalf("a write that does not wait, with the replicas frozen: %d: %v", i, err)
		}
	}
	// The retry (same eids) once the replicas are back counts nothing twice.
	deadline := time.Now().Add(10 * time.Second)
	for {
		errs := write(st, frozen)
		if errs[0] == nil && errs[len(errs)-1] == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes after the replicas came back: %v", errs[0])
		}
	}
	if got := st.Read(ctx, frozen[:1])[0]; got.Err != nil || got.Counts[0].Day != 1 || got.Counts[1].Day != 240 {
		t.Fatalf("after the retry: %+v, want device 1 and bundle 240 (the frozen batch once)", got)
	}
}

// BenchmarkReplicatedWrite is one write batch of 20 notices of 3
// dimensions on a server with a replica, answered at the master's answer
// (replicas=0) or once the replica has it (replicas=1, COUNTER_WRITE_REPLICAS).
func BenchmarkReplicatedWrite(b *testing.B) {
	for _, n := range []int{0, 1} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			srv := redistest.StartSingle(b)
			srv.StartReplica(b)
			st, _ := testStore(b, srv, newClock(time.Now()), fmt.Sprintf("COUNTER_WRITE_REPLICAS=%d", n))
			ctx := context.Background()
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				qs := make([]Query, 20)
				for k := range qs {
					qs[k] = Query{CID: "1", Event: "win", EID: fmt.Sprintf("e-%d-%d", i, k), Windows: []int{24},
						Dims: []Dim{{Name: "device", ID: fmt.Sprintf("d-%d-%d", i, k)}, {Name: "bundle", ID: fmt.Sprintf("b-%d", k)}, {Name: "tagid", ID: "7"}}}
				}
				start := time.Now()
				if _, errs := st.IncrBatch(ctx, qs); errs[0] != nil {
					b.Fatal(errs[0])
				}
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds()), "p99-µs")
		})
	}
}
