package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/freqcap/freqcap/client"
)

// decideRate is how many Decide calls of 50 candidates a second the
// decide runs make: 150 counters and 300 Redis commands a call.
const decideRate = 200

// decideCandidates are 50 campaigns capped on the device (cold: one of the
// filled devices per call), the bundle and the tag id (hot, cached).
func decideCandidates() []client.Candidate {
	cands := make([]client.Candidate, 50)
	for i := range cands {
		cid := "42"
		if i > 0 {
			cid = "d" + strconv.Itoa(i)
		}
		cands[i] = client.Candidate{CID: cid, Caps: []client.Cap{
			{Dim: "device", Day: 10, Windows: []client.Window{{Hours: 3, Limit: 5}}},
			{Dim: "bundle", Day: 1_000_000, Windows: []client.Window{{Hours: 3, Limit: 500_000}}},
			{Dim: "tagid", Day: 1_000_000},
		}}
	}
	return cands
}

// decideCIDs are the ids of decideCandidates, whose caps the by-id runs
// declare (the wrk script's decide mode names the same).
func decideCIDs() []string {
	cands := decideCandidates()
	cids := make([]string, len(cands))
	for i := range cands {
		cids[i] = cands[i].CID
	}
	return cids
}

// declaredCaps are what campaign i of the by-id runs' 50 declares in
// callback's admin API: 3 caps at 2 levels on 2 identities, the campaign's
// own on the device and its advertiser's (one of 5, shared by 10
// campaigns) on the bundle.
func declaredCaps(i int) string {
	return fmt.Sprintf(`{"advertiser": "adv%d", "caps": [
  {"level": "campaign", "event": "win", "dim": "device", "window": {"unit": "day", "n": 1}, "limit": 10},
  {"level": "campaign", "event": "win", "dim": "device", "window": {"unit": "hours", "n": 3}, "limit": 5},
  {"level": "advertiser", "event": "win", "dim": "bundle", "window": {"unit": "day", "n": 1}, "limit": 1000000}]}`, i%5)
}

// declare stores declaredCaps for every candidate through the admin API.
func (st *stack) declare(ctx context.Context, cids []string) error {
	for i, cid := range cids {
		if err := st.putCampaign(ctx, cid, declaredCaps(i)); err != nil {
			return err
		}
	}
	return nil
}

// putCampaign stores campaign cid's declaration (JSON) through the admin API.
func (st *stack) putCampaign(ctx context.Context, cid, body string) error {
	resp, err := sendJSON(ctx, http.MethodPut, st.adminURL+"/v1/campaigns/"+cid, []byte(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("declare caps of %s: %s", cid, resp.Status)
	}
	return nil
}

// sendJSON sends a JSON body; the caller closes the answer's body.
func sendJSON(ctx context.Context, method, url string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// decideClient is the client a decide run calls with: direct (reading
// Redis) for names ending in -direct, else over HTTP; the bench counter's
// 100 ms deadline.
func (st *stack) decideClient(name string) (*client.Client, error) {
	opts := client.Options{Timeout: 100 * time.Millisecond}
	if strings.HasSuffix(name, "-direct") {
		return client.NewDirect("redis://"+st.redisAddr, opts, client.DirectOptions{})
	}
	return client.New(st.counterURL, opts)
}

// decide times one Decide of 50 candidates at decideRate calls/s from the
// bench process: over HTTP through the counter (name decide-50-http) or
// reading Redis directly (decide-50-direct); by campaign id with the caps
// declared (DecideIDs, decide-50-ids-http and decide-50-ids-direct). Calls
// are started on a schedule, not one after the other, so a slow call does
// not hide the queue behind it. A degraded call is an error.
func (st *stack) decide(ctx context.Context, name string) (result, error) {
	c, err := st.decideClient(name)
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	ask, what, err := st.decideAsk(ctx, c, name)
	if err != nil {
		return result{}, err
	}
	var mu sync.Mutex
	var took []time.Duration
	var failed int
	call := func(i int) {
		ids := client.Identities{"device": deviceID(i * 7919 % st.s.fill), "bundle": "com.hot", "tagid": "7"}
		start := time.Now()
		err := ask(ids)
		d := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		took = append(took, d)
		if err != nil {
			failed++
		}
	}
	run := func(d time.Duration) {
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / decideRate)
		defer tick.Stop()
		for i, end := 0, time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; i++ {
			<-tick.C
			wg.Go(func() { call(i) })
		}
		wg.Wait()
	}
	run(2 * time.Second) // warm-up: connections, caches
	took, failed = nil, 0
	before := st.cpu()
	start := time.Now()
	run(st.s.duration)
	r := result{rate: float64(len(took)) / time.Since(start).Seconds(), cpu: st.cpuSince(before, time.Since(start)), errors: failed}
	slices.Sort(took)
	if len(took) > 0 {
		q := func(p float64) time.Duration { return took[min(len(took)-1, int(p*float64(len(took))))] }
		r.p50, r.p99, r.p999 = q(0.50), q(0.99), q(0.999)
	}
	r.note = fmt.Sprintf("%d calls of %s, %d degraded", len(took), what, failed)
	return r, ctx.Err()
}

// decideAsk is one call of a decide run and what it asks: Decide with the
// candidates' caps, or, for names with -ids-, DecideIDs with their ids
// (their caps declared first).
func (st *stack) decideAsk(ctx context.Context, c *client.Client, name string) (func(client.Identities) error, string, error) {
	cands := decideCandidates()
	if !strings.Contains(name, "-ids-") {
		return func(ids client.Identities) error {
			_, err := c.Decide(ctx, ids, cands)
			return err
		}, "50 candidates (150 counters)", nil
	}
	cids := decideCIDs()
	if err := st.declare(ctx, cids); err != nil {
		return nil, "", err
	}
	return func(ids client.Identities) error {
		_, err := c.DecideIDs(ctx, ids, cids)
		return err
	}, "50 candidates by id (3 declared caps each at 2 levels: campaign on the device, advertiser on the bundle)", nil
}
