package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// The overshoot simulation: how many wins beyond a cap of 1 a day a
// device gets when several auctions reach the bidder before the first
// win notice is counted, without and with reservations. A seeded stream
// drives the real counter: each device sees a burst of concurrent
// auctions, each allowed bid wins with a fixed rate, and its win (or loss)
// notice reaches the counter after a delay drawn from a log-normal
// distribution, written as callback writes it (release on wins, lost on
// losses). Both runs meet the same auctions, draws and delays.
const (
	overshootDevices = 1000
	overshootBurst   = 3.0                    // mean auctions per device (1 + geometric)
	overshootSpread  = 300 * time.Millisecond // a burst's auctions arrive within this
	overshootWinRate = 0.5
	overshootMedian  = 400 * time.Millisecond // notice delay: log-normal, this median
	overshootSigma   = 0.6                    // and this sigma (p90 about 2.2x the median)
	overshootRate    = 300                    // devices' bursts starting a second
)

// auction is one bid opportunity of the stream.
type auction struct {
	dev   int
	at    time.Duration // from the run's start
	wins  bool
	delay time.Duration
}

// overshootStream is the seeded stream of auctions.
func overshootStream(seed uint64) []auction {
	rng := rand.New(rand.NewPCG(seed, 99))
	var out []auction
	for dev := range overshootDevices {
		start := time.Duration(dev) * time.Second / overshootRate
		n := 1
		for rng.Float64() < 1-1/overshootBurst && n < 10 {
			n++
		}
		for range n {
			d := time.Duration(float64(overshootMedian) * math.Exp(overshootSigma*rng.NormFloat64()))
			out = append(out, auction{dev: dev, at: start + time.Duration(rng.Int64N(int64(overshootSpread))),
				wins: rng.Float64() < overshootWinRate, delay: d})
		}
	}
	return out
}

// overshoot runs the stream twice, without and with reservations, and
// notes the wins beyond the cap per 1,000 capped devices of each.
func (st *stack) overshoot(ctx context.Context, round int) (result, error) {
	stream := overshootStream(1) // one stream every round: what varies is timing
	var notes []string
	var r result
	for _, reserve := range []bool{false, true} {
		cid := fmt.Sprintf("os-%d-%v", round, reserve)
		if err := st.putCampaign(ctx, cid, `{"caps":[{"event":"win","dim":"device","window":{"unit":"day","n":1},"limit":1}]}`); err != nil {
			return result{}, err
		}
		start := time.Now()
		wins, err := st.overshootRun(ctx, cid, stream, reserve)
		if err != nil {
			return result{}, err
		}
		r.rate = float64(len(stream)) / time.Since(start).Seconds()
		capped, beyond := 0, 0
		for _, w := range wins {
			if w >= 1 {
				capped++
				beyond += w - 1
			}
		}
		per := 1000 * float64(beyond) / float64(max(capped, 1))
		notes = append(notes, fmt.Sprintf("%s reservations: %.0f wins beyond the cap per 1,000 capped devices (%d of %d devices capped)",
			map[bool]string{false: "without", true: "with"}[reserve], per, capped, overshootDevices))
	}
	r.note = fmt.Sprintf("%d auctions of %d devices; ", len(stream), overshootDevices) + strings.Join(notes, "; ")
	return r, ctx.Err()
}

// overshootRun plays the stream on campaign cid and answers each device's
// wins.
func (st *stack) overshootRun(ctx context.Context, cid string, stream []auction, reserve bool) ([]int, error) {
	c, err := client.New(st.counterURL, client.Options{Timeout: time.Second, CountReserved: reserve})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	wins := make([]int, overshootDevices)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	start := time.Now()
	for i, a := range stream {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(a.at)))
			dev, bid := deviceID(a.dev), fmt.Sprintf("%s-%d", cid, i)
			ids := client.Identities{"device": dev}
			ds, err := c.DecideIDs(ctx, ids, []string{cid})
			if err != nil {
				fail(err)
				return
			}
			if !ds[0].Allowed {
				return // no bid
			}
			if reserve {
				if _, err := c.Reserve(ctx, ids, []client.Creative{{CID: cid}}, bid, 0); err != nil {
					fail(err)
				}
			}
			if a.wins {
				mu.Lock()
				wins[a.dev]++
				mu.Unlock()
			}
			time.Sleep(a.delay)
			fail(st.notify(ctx, cid, dev, bid, a.wins))
		})
	}
	wg.Wait()
	return wins, firstErr
}

// notify writes a bid's win (counted, its reservation released in the
// same run) or loss (released only), as callback does.
func (st *stack) notify(ctx context.Context, cid, dev, bid string, won bool) error {
	it := counting.BatchItem{CID: cid, Event: "win", Dims: map[string]string{"device": dev}, EID: bid, Release: won, Lost: !won}
	b, err := json.Marshal(counting.BatchRequest{Items: []counting.BatchItem{it}})
	if err != nil {
		return err
	}
	resp, err := sendJSON(ctx, http.MethodPost, st.counterURL+"/v1/incr/batch", b)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out counting.BatchResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Results) != 1 || out.Results[0].Code != 0 {
		return fmt.Errorf("notice of %s: %d %+v %v", bid, resp.StatusCode, out, err)
	}
	return nil
}
