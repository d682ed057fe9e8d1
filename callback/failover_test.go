package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
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
	s := startStackOn(t, srv)
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/fo", `{"winLimitHours":2}`)
	const n = 6000
	key := "freq:{win:device:fo:dev}"
	victim := srv.MasterOf(t, key)

	var next, refused atomic.Int64
	var firstRefusal, lastRefusal atomic.Int64 // unix ns
	var killedAt time.Time
	var kill sync.Once
	var failed atomic.Value
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= n {
					return
				}
				if i == n/3 {
					kill.Do(func() { killedAt = time.Now(); srv.Node(victim).Kill() })
				}
				u := fmt.Sprintf("http://%s/win?cid=fo&device=dev&eid=fo-%d", s.public, i)
				for attempt := 0; ; attempt++ {
					resp, err := client.Get(u)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusNoContent {
							break
						}
						if resp.StatusCode != http.StatusServiceUnavailable {
							failed.Store(fmt.Sprintf("notice %d: status %d", i, resp.StatusCode))
							return
						}
						now := time.Now().UnixNano()
						firstRefusal.CompareAndSwap(0, now)
						lastRefusal.Store(now)
						refused.Add(1)
					}
					if attempt > 3000 {
						failed.Store(fmt.Sprintf("notice %d never accepted: %v", i, err))
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	sent := time.Since(killedAt)
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	took := srv.WaitServing(t, 30*time.Second)
	if got := srv.MasterOf(t, key); got == victim {
		t.Fatalf("the killed master %s still serves %s", victim, key)
	}
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 60*time.Second)
	drained := time.Since(killedAt)
	time.Sleep(500 * time.Millisecond) // the last batches land
	counted := s.get(key)
	refusedFor := time.Duration(0)
	if f := firstRefusal.Load(); f != 0 {
		refusedFor = time.Duration(lastRefusal.Load() - f)
	}
	t.Logf("failover: %d notices acknowledged, %d counted (%d lost); %d answers 503 over %s; the last notice acknowledged %s and the journal drained %s after the kill (cluster ok %s after the sends)",
		n, counted, n-counted, refused.Load(), refusedFor.Round(time.Millisecond), sent.Round(time.Millisecond), drained.Round(time.Millisecond), took.Round(time.Millisecond))
	if counted > n {
		t.Errorf("%d counted of %d notices: a retried notice counted twice", counted, n)
	}
	// What an asynchronous replica can lose is what its master acknowledged
	// in the moments before it died, not a third of the run.
	if counted < n-n/10 {
		t.Errorf("%d counted of %d notices acknowledged: more than a replication window lost", counted, n)
	}
}
