package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/redistest"
)

// BenchmarkJournalAppend is the exchange-facing cost of persisting a
// notice: 1 or 32 appenders on one partition, with the master's answer
// alone (replicas=0) and with a replica's acknowledgement (replicas=1, a
// WAIT after each group). It reports the appends' p50 and p99 and how many
// notices shared one WAIT.
func BenchmarkJournalAppend(b *testing.B) {
	for _, appenders := range []int{1, 32} {
		for _, replicas := range []int{0, 1} {
			b.Run(fmt.Sprintf("appenders=%d/replicas=%d", appenders, replicas), func(b *testing.B) {
				benchmarkAppend(b, appenders, replicas)
			})
		}
	}
}

func benchmarkAppend(b *testing.B, appenders, replicas int) {
	srv := redistest.StartSingle(b)
	srv.StartReplica(b)
	j, _ := newTestJournalOn(b, srv, 1, 1<<30)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	j.Replicate(ctx, replicas, time.Second)
	srv.OnMasters(b, "CONFIG", "RESETSTAT")
	var mu sync.Mutex
	took := make([]time.Duration, 0, b.N)
	var wg sync.WaitGroup
	next := make(chan int)
	b.ResetTimer()
	for range appenders {
		wg.Go(func() {
			for i := range next {
				start := time.Now()
				if err := j.Append(ctx, testNotice(fmt.Sprintf("e%d", i))); err != nil {
					b.Error(err)
				}
				d := time.Since(start)
				mu.Lock()
				took = append(took, d)
				mu.Unlock()
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*99/100)].Microseconds()), "p99-µs")
	if waits := srv.TotalCalls(b, "wait"); waits > 0 {
		b.ReportMetric(float64(b.N)/float64(waits), "notices/WAIT")
	}
}

// BenchmarkSignedAppend is an append of a signed notice (append.lua: the
// record that takes it once, and the XADD) against a plain XADD, 32
// appenders on 8 partitions. It reports the Redis bytes each notice's
// record holds until its URL expires (MEMORY USAGE of the seen:* sets
// over the notices, the URLs expiring over 10 minutes): what the
// capacity table multiplies by the notices a URL's validity holds.
func BenchmarkSignedAppend(b *testing.B) {
	for _, signed := range []bool{false, true} {
		b.Run(fmt.Sprintf("signed=%v", signed), func(b *testing.B) {
			srv := redistest.StartSingle(b)
			j, c := newTestJournalOn(b, srv, 8, 1<<30)
			ctx := context.Background()
			exp := time.Now().Add(time.Hour)
			var wg sync.WaitGroup
			next := make(chan int)
			b.ResetTimer()
			for range 32 {
				wg.Go(func() {
					for i := range next {
						n := testNotice(fmt.Sprintf("req-%d:1", i))
						if signed {
							n.exp = exp.Add(time.Duration(i%600) * time.Second)
						}
						if err := j.Append(ctx, n); err != nil {
							b.Error(err)
						}
					}
				})
			}
			for i := range b.N {
				next <- i
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			if !signed {
				return
			}
			var bytes int64
			for _, k := range srv.Keys(b, "seen:*") {
				n, err := c.Do(ctx, c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64()
				if err != nil {
					b.Fatal(err)
				}
				bytes += n
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "seen-B/notice")
		})
	}
}

// BenchmarkJournalRead is the forwarder's side of the journal per notice,
// in each CALLBACK_JOURNAL_FORMAT: reading entries in batches of 100
// (XREADGROUP), decoding them and acknowledging them (XACK). It reports
// the journal's Redis bytes per undelivered notice, measured before the
// reads.
func BenchmarkJournalRead(b *testing.B) {
	for _, format := range []int{1, 2} {
		b.Run(fmt.Sprintf("format=%d", format), func(b *testing.B) { benchmarkRead(b, format == 2) })
	}
}

func benchmarkRead(b *testing.B, packed bool) {
	srv := redistest.StartSingle(b)
	j, c := newTestJournalOn(b, srv, 1, 1<<30)
	j.packed = packed
	ctx := context.Background()
	for i := range b.N {
		if err := j.Append(ctx, testNotice(fmt.Sprintf("req-%d:1", i))); err != nil {
			b.Fatal(err)
		}
	}
	size, err := c.Do(ctx, c.B().MemoryUsage().Key(journalKey(0)).Samples(0).Build()).AsInt64()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for read := 0; read < b.N; {
		es, err := j.Read(ctx, 0, 100, 0)
		if err != nil || len(es) == 0 {
			b.Fatalf("read %d of %d: %v", read, b.N, err)
		}
		for _, e := range es {
			if e.bad != nil {
				b.Fatal(e.bad)
			}
		}
		if err := j.Ack(ctx, es); err != nil {
			b.Fatal(err)
		}
		read += len(es)
	}
	b.StopTimer()
	b.ReportMetric(float64(size)/float64(b.N), "journal-B/notice")
}
