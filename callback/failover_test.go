package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/redistest"
)

// TestFailoverKeepsCountingOnce runs notices through callback on a Redis
// Cluster and kills (SIGKILL) the master serving the counted key a third
// of the way in: its replica takes over, the notices refused meanwhile
// (503) are sent again, and every notice is counted at most once (event
// ids). Replication is asynchronous, so what the master had acknowledged
// but not yet replicated may be lost: the test reports how many, and how
// long notices were refused.
func TestFailoverKeepsCountingOnce(t *testing.T) {
	const n = 6000
	counted := failover(t, n, nil, nil, false)
	if counted > n {
		t.Errorf("%d counted of %d notices: a retried notice counted twice", counted, n)
	}
	// What an asynchronous replica can lose is what its master acknowledged
	// in the moments before it died, not a third of the run.
	if counted < n-n/10 {
		t.Errorf("%d counted of %d notices acknowledged: more than a replication window lost", counted, n)
	}
}

// TestFailoverLosesNothingAcknowledgedOnceReplicated is the same failover
// with CALLBACK_JOURNAL_REPLICAS=1 and COUNTER_WRITE_REPLICAS=1: a notice
// is acknowledged, and its count written, only once a replica holds it, so
// exactly every notice is counted. The promoted master has no replica
// until the killed one comes back as its replica: meanwhile its journal
// partitions refuse (the resends go to the others) and its counts are
// retried.
func TestFailoverLosesNothingAcknowledgedOnceReplicated(t *testing.T) {
	const n = 6000
	if counted := failover(t, n, []string{"COUNTER_WRITE_REPLICAS=1"}, []string{"CALLBACK_JOURNAL_REPLICAS=1"}, true); counted != n {
		t.Errorf("%d counted of %d notices acknowledged once replicated, want exactly %d", counted, n, n)
	}
}

// failover sends n notices through callback on a Redis Cluster, kills the
// master serving the counted key a third of the way in and, with rejoin,
// starts it again (it comes back as the new master's replica) two thirds
// of the way in, once the cluster serves again. It returns the count.
func failover(t *testing.T, n int, counterEnv, callbackEnv []string, rejoin bool) int64 {
	srv := redistest.StartCluster(t)
	// Entries a forwarder took from a stream on the dead master wait for
	// the claimer: 1 s here, not the 30 s default.
	s := startStackWith(t, srv, counterEnv, append([]string{"CALLBACK_CLAIM_IDLE=1s"}, callbackEnv...))
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/fo", `{"winLimitHours":2}`)
	key := "freq:{win:device:fo:dev}"
	victim := srv.MasterOf(t, key)

	var killedAt time.Time
	during := map[int]func(){n / 3: func() { killedAt = time.Now(); srv.Node(victim).Kill() }}
	moved := true
	if rejoin {
		// The hooks run on the senders' goroutines: no t.Fatal there.
		during[2*n/3] = func() {
			if moved = masterMoved(t, srv, key, victim, 30*time.Second); moved {
				srv.Node(victim).Restart()
			}
		}
	}
	got := sendTimed(t, n, func(i int) string {
		return fmt.Sprintf("http://%s/win?cid=fo&device=dev&eid=fo-%d", s.public, i)
	}, during)
	if !moved {
		t.Fatalf("the killed master %s still serves %s after 30s", victim, key)
	}
	sent := time.Since(killedAt)
	took := srv.WaitServing(t, 30*time.Second)
	if !masterMoved(t, srv, key, victim, 30*time.Second) {
		t.Fatalf("the killed master %s still serves %s", victim, key)
	}
	s.waitSettled(60 * time.Second) // the last batches have landed
	drained := time.Since(killedAt)
	counted := s.get(key)
	refusedFor := got.last.Sub(got.first)
	t.Logf("failover: %d notices acknowledged, %d counted (%d lost); %d answers 503 over %s; the last notice acknowledged %s and the journal drained %s after the kill (cluster ok %s after the sends)",
		n, counted, int64(n)-counted, got.refused, refusedFor.Round(time.Millisecond), sent.Round(time.Millisecond), drained.Round(time.Millisecond), took.Round(time.Millisecond))
	return counted
}

// masterMoved waits up to within until a master other than victim serves
// key: the replica was promoted (and a restarted victim knows it). Between
// the victim's failure and the promotion no master serves it.
func masterMoved(t *testing.T, srv *redistest.Server, key, victim string, within time.Duration) bool {
	slot := redistest.KeySlot(key)
	moved := func() bool {
		for addr, ranges := range srv.SlotOwners(t) {
			for _, r := range ranges {
				if slot >= r[0] && slot <= r[1] {
					return addr != victim
				}
			}
		}
		return false
	}
	for deadline := time.Now().Add(within); !moved(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
