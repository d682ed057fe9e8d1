package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

// The campaigns file seeds what Redis does not have: an admin edit
// survives a restart. It is decoded strictly and checked whole first.
func TestCampaignsFileSeedsOnlyAbsentCampaigns(t *testing.T) {
	srv := redistest.Start(t)
	c := &Campaigns{rdb: newRedisClient(t, srv)}
	ctx := context.Background()
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "campaigns.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := write(`[{"cid":"1","winLimitHours":3},{"cid":"2","winLimitHours":5,"paceWindowSec":60}]`)
	if stored, kept, err := c.LoadFile(ctx, file); err != nil || stored != 2 || kept != 0 {
		t.Fatalf("first load: stored %d kept %d, %v; want 2, 0", stored, kept, err)
	}
	if err := c.Put(ctx, "1", Campaign{WinLimitHours: 12}); err != nil {
		t.Fatal(err)
	}
	if stored, kept, err := c.LoadFile(ctx, file); err != nil || stored != 0 || kept != 2 {
		t.Fatalf("second load: stored %d kept %d, %v; want 0, 2", stored, kept, err)
	}
	if camp, ok, err := c.Read(ctx, "1"); err != nil || !ok || camp.WinLimitHours != 12 {
		t.Errorf("campaign 1 after a restart: %+v %v %v, want the admin's winLimitHours 12", camp, ok, err)
	}
	if camp, _, _ := c.Read(ctx, "2"); camp.PaceWindowSec != 60 {
		t.Errorf("campaign 2: %+v, want paceWindowSec 60", camp)
	}

	for body, want := range map[string]string{
		`[{"cid":"3","winLimitHour":3}]`:                `unknown field "winLimitHour"`,
		`[{"cid":"3","winLimitHours":-1}]`:              "entry 0: winLimitHours must be",
		`[{"cid":"3","winLimitHours":1},{"cid":"3"}]`:   "campaign 3 is listed twice",
		`[{"cid":"3","winLimitHours":1}] [{"cid":"4"}]`: "data after the array",
		`[{"cid":"3","winLimitHours":1},{"cid":"a:b"}]`: "entry 1: cid must be",
		`{"cid":"3","winLimitHours":1}`:                 "cannot unmarshal object",
	} {
		_, _, err := c.LoadFile(ctx, write(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", body, err, want)
		}
		if _, ok, _ := c.Read(ctx, "3"); ok {
			t.Fatalf("%s: campaign 3 stored from a file that was refused", body)
		}
	}
}

// The campaigns' client-side cache holds at most
// CALLBACK_CAMPAIGN_CACHE_BYTES: notices of 40,000 distinct unknown
// campaigns (each cached as unknown) leave the heap within a few MiB of
// where it was, where rueidis's default (128 MiB a connection) kept them
// all until their TTL and beyond.
func TestCampaignCacheIsBounded(t *testing.T) {
	srv := redistest.Start(t)
	s, err := loadSettings([]string{"REDIS_URL=" + srv.URL(), "CALLBACK_CAMPAIGN_CACHE_BYTES=1048576"})
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := redisconn.Open(s.RedisURL, tuneRedis(s, s.RedisPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	c := &Campaigns{rdb: rdb, ttl: time.Hour}
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range 40_000 {
		if _, known, err := c.Get(ctx, fmt.Sprintf("unknown-campaign-%08d", i)); err != nil || known {
			t.Fatalf("campaign %d: known %v, %v", i, known, err)
		}
	}
	// The bound is per Redis node the client holds a connection to (a
	// Cluster's masters).
	nodes := int64(len(rdb.Nodes()))
	if grew, bound := int64(heap())-int64(before), nodes<<20+5<<20; grew > bound {
		t.Errorf("the heap grew by %d bytes after 40,000 unknown campaigns, want %d nodes' 1 MiB cache bound and a little (%d)", grew, nodes, bound)
	}
}
