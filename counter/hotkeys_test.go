package main

import (
	"context"
	"testing"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// A device read 10,000 times becomes hot and then stops reaching Redis:
// its reads are served by client-side caching (INFO commandstats).
func TestAHotDeviceStopsReachingRedis(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Now()), "COUNTER_HOT_KEY_RATE=100")
	ctx := context.Background()
	q := []Query{{CID: "1", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "bot"}}}}
	mustIncr(t, st, q[0])
	deadline := time.Now().Add(10 * time.Second)
	reads := 0
	for reads < 10_000 || !st.IsHot(core.Tagged("", &itemsOf(q)[0])) {
		if r := st.Read(ctx, q)[0]; r.Err != nil || r.Counts[0].Day != 1 {
			t.Fatalf("read %d: %+v", reads, r)
		}
		reads++
		if time.Now().After(deadline) {
			t.Fatalf("device not hot after %d reads: %+v", reads, st.HotKeys())
		}
	}
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	for range 1000 {
		if r := st.Read(ctx, q)[0]; r.Err != nil || r.Counts[0].Day != 1 {
			t.Fatalf("hot read: %+v", r)
		}
	}
	for _, cmd := range []string{"get", "hgetall"} {
		if calls := srv.TotalCalls(t, cmd); calls > 5 {
			t.Errorf("1000 reads of a hot device reached Redis: %d %s", calls, cmd)
		}
	}
	// It counts as it did: a write is seen at once (Redis invalidates the copy).
	mustIncr(t, st, q[0])
	waitFor := time.Now().Add(2 * time.Second)
	for st.Read(ctx, q)[0].Counts[0].Day != 2 {
		if time.Now().After(waitFor) {
			t.Fatal("a write to a hot device was not seen within 2 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// itemsOf is the items a read of qs is made of.
func itemsOf(qs []Query) []counting.Item {
	its, _ := campaign.Items(qs, false)
	return its
}
