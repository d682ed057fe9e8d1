package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/freqcap/freqcap/shared/redistest"
)

// BenchmarkForwarderItems is what the forwarder makes of a batch of 100
// wins before it sends them, as make bench's end to end sends them (each
// on its own device, all on one tagid): each notice's campaign looked up
// (through client-side caching) and what it counts at each level, its
// campaign's caps on the device and its advertiser's on the tagid. One op
// is a batch.
func BenchmarkForwarderItems(b *testing.B) {
	srv := redistest.StartSingle(b)
	c := &Campaigns{rdb: newRedisClient(b, srv), ttl: time.Hour}
	var camp Campaign
	if err := json.Unmarshal([]byte(`{"advertiser":"acme","winLimitHours":3,"caps":[
		{"level":"campaign","event":"win","dim":"device","window":{"unit":"hours","n":3},"limit":1},
		{"level":"advertiser","event":"win","dim":"tagid","window":{"unit":"day","n":1},"limit":100000}]}`), &camp); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Put(ctx, "42", camp); err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	f := newForwarder(Settings{Config: Config{ForwardTimeout: time.Second}, Counter: u}, nil, nil, c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.metrics = newMetrics(prometheus.NewRegistry(), nil)
	batch := make([]entry, 100)
	for i := range batch {
		batch[i] = entry{n: notice{event: "win", cid: "42", eid: "req-" + strconv.Itoa(i) + ":1",
			dims: map[string]string{"device": "dev-" + strconv.Itoa(i), "tagid": "e2e"}}}
	}
	if its := f.items(testSchema, batch); len(its) != 100 || len(its[0].Levels) == 0 {
		b.Fatalf("items: %+v", its)
	}
	b.ReportAllocs()
	for b.Loop() {
		f.items(testSchema, batch)
	}
}
