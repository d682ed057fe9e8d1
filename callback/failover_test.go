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
	srv := redistest.StartCluster(t)
	// Entries a forwarder took from a stream on the dead master wait for
	// the claimer: 1 s here, not the 30 s default.
	s := startStackOn(t, srv, "CALLBACK_CLAIM_IDLE=1s")
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/fo", `{"winLimitHours":2}`)
	const n = 6000
	key := "freq:{win:device:fo:dev}"
	victim := srv.MasterOf(t, key)

	var killedAt time.Time
	got := sendTimed(t, n, func(i int) string {
		return fmt.Sprintf("http://%s/win?cid=fo&device=dev&eid=fo-%d", s.public, i)
	}, map[int]func(){n / 3: func() { killedAt = time.Now(); srv.Node(victim).Kill() }})
	sent := time.Since(killedAt)
	took := srv.WaitServing(t, 30*time.Second)
	if now := srv.MasterOf(t, key); now == victim {
		t.Fatalf("the killed master %s still serves %s", victim, key)
	}
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 60*time.Second)
	drained := time.Since(killedAt)
	time.Sleep(500 * time.Millisecond) // the last batches land
	counted := s.get(key)
	refusedFor := got.last.Sub(got.first)
	t.Logf("failover: %d notices acknowledged, %d counted (%d lost); %d answers 503 over %s; the last notice acknowledged %s and the journal drained %s after the kill (cluster ok %s after the sends)",
		n, counted, n-counted, got.refused, refusedFor.Round(time.Millisecond), sent.Round(time.Millisecond), drained.Round(time.Millisecond), took.Round(time.Millisecond))
	if counted > n {
		t.Errorf("%d counted of %d notices: a retried notice counted twice", counted, n)
	}
	// What an asynchronous replica can lose is what its master acknowledged
	// in the moments before it died, not a third of the run.
	if counted < n-n/10 {
		t.Errorf("%d counted of %d notices acknowledged: more than a replication window lost", counted, n)
	}
}
