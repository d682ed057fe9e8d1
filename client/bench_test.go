package client_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// BenchmarkDecide50 is one Decide of 50 candidates (each capping the
// device by day and a 3-hour window, and the bundle by day: 100 counts)
// over HTTP and in direct mode, against the test stack's counter and
// Redis.
func BenchmarkDecide50(b *testing.B) {
	cands := make([]client.Candidate, 50)
	for i := range cands {
		cands[i] = client.Candidate{CID: fmt.Sprint("bench-", i), Caps: []client.Cap{
			{Dim: "device", Day: 3, Windows: []client.Window{{Hours: 3, Limit: 2}}},
			{Dim: "bundle", Day: 1000},
		}}
	}
	ids := client.Identities{"device": "bench-device", "bundle": "com.bench"}
	benchModes(b, func(c *client.Client) error {
		_, err := c.Decide(context.Background(), ids, cands)
		return err
	})
}

// benchModes runs call in a loop on a client over HTTP and on a direct
// one, as sub-benchmarks http and direct.
func benchModes(b *testing.B, call func(*client.Client) error) {
	for _, mode := range []string{"http", "direct"} {
		b.Run(mode, func(b *testing.B) {
			var c *client.Client
			var err error
			if mode == "http" {
				c, err = client.New(counterURL, client.Options{Timeout: time.Second, Token: testToken})
			} else {
				c, err = client.NewDirect(redisURL, client.Options{Timeout: time.Second}, client.DirectOptions{})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if err := call(c); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process (the bidder's side: not Redis's,
// nor the counter's) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecideIDs50 is one DecideIDs of 50 campaigns by id, each
// declaring 3 caps on the device and the bundle.
func BenchmarkDecideIDs50(b *testing.B) {
	cids := make([]string, 50)
	caps := []client.DeclaredCap{
		{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 3},
		{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 3}, Limit: 2},
		{Level: "campaign", Event: "win", Dim: "bundle", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 1000},
	}
	for i := range cids {
		cids[i] = fmt.Sprint("bench-ids-", i)
		declareCaps(b, cids[i], caps)
	}
	ids := client.Identities{"device": "bench-device", "bundle": "com.bench"}
	benchModes(b, func(c *client.Client) error {
		_, err := c.DecideIDs(context.Background(), ids, cids)
		return err
	})
}
