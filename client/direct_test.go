package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

func newDirect(t *testing.T, url string, opts client.Options, d client.DirectOptions) *client.Client {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second
	}
	c, err := client.NewDirect(url, opts, d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// countBatch counts notices on the counter in one /v1/incr/batch.
func countBatch(t *testing.T, items []counting.BatchItem) {
	t.Helper()
	body, err := json.Marshal(counting.BatchRequest{Items: items})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, counterURL+"/v1/incr/batch", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got counting.BatchResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("incr/batch: %d, %v", resp.StatusCode, err)
	}
	for i, r := range got.Results {
		if r.Code != 0 {
			t.Fatalf("incr/batch item %d: %d %s", i, r.Code, r.Msg)
		}
	}
}

// A direct Client decides exactly as an HTTP Client on the same counts:
// random notices, then random candidate lists asked of both.
func TestDirectDecidesAsHTTP(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 13))
	pick := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(n)) }
	var notices []counting.BatchItem
	for i := range 400 {
		it := counting.BatchItem{
			CID:  pick("dx", 6),
			Dims: map[string]string{"device": pick("dev-", 5), "bundle": pick("com.b", 3), "tagid": pick("tag-", 2)},
			EID:  fmt.Sprintf("dx-%d", i),
		}
		if rng.IntN(2) == 0 {
			it.WindowHours = []int{24}
		}
		if rng.IntN(3) == 0 {
			it.PaceWindowSec = 3600
		}
		notices = append(notices, it)
	}
	for i := 0; i < len(notices); i += 100 {
		countBatch(t, notices[i:i+100])
	}
	countHoursAgo(t, rng)

	viaHTTP := newClient(t, client.Options{})
	direct := newDirect(t, redisURL, client.Options{}, client.DirectOptions{})
	blocked := map[client.Reason]int{}
	for call := range 300 {
		ids := client.Identities{"device": pick("dev-", 6), "bundle": pick("com.b", 4)}
		switch rng.IntN(10) {
		case 0:
			ids["bundle"] = "not an id" // refused: the candidate is degraded
		case 1:
			ids["country"] = "NL" // not a dimension of the counter: refused too
		default:
			ids["tagid"] = pick("tag-", 2)
		}
		cands := make([]client.Candidate, 1+rng.IntN(8))
		for i := range cands {
			cands[i].CID = pick("dx", 7)
			for _, dim := range []string{"device", "bundle", "tagid", "country"} {
				if rng.IntN(3) == 0 {
					continue
				}
				cp := client.Cap{Dim: dim, Day: int64(rng.IntN(30))}
				switch rng.IntN(4) {
				case 0:
					cp.Windows = []client.Window{{Hours: 2, Limit: int64(rng.IntN(20))}, {Hours: 24, Limit: int64(rng.IntN(25))}}
				case 1:
					// Out of order, one window twice: each limit against its own window's sum.
					cp.Windows = []client.Window{{Hours: 24, Limit: int64(rng.IntN(25))}, {Hours: 2, Limit: int64(rng.IntN(20))}, {Hours: 24, Limit: int64(rng.IntN(5))}}
				}
				if rng.IntN(3) == 0 {
					cp.Pace = &client.Pace{Window: time.Hour, Limit: int64(rng.IntN(10)), MinGap: time.Duration(rng.IntN(2)) * time.Hour}
				}
				cands[i].Caps = append(cands[i].Caps, cp)
			}
		}
		want, werr := viaHTTP.Decide(context.Background(), ids, cands)
		got, gerr := direct.Decide(context.Background(), ids, cands)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("call %d: HTTP error %v, direct error %v", call, werr, gerr)
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.Reason == client.PaceGap {
				// Milliseconds since the last event, on each call's clock.
				w.Count, g.Count = 0, 0
			}
			if w != g {
				t.Fatalf("call %d, candidate %d (%+v, ids %v):\nHTTP   %+v\ndirect %+v", call, i, cands[i], ids, want[i], got[i])
			}
			blocked[w.Reason]++
		}
	}
	// The streams must exercise every way a candidate decides.
	for _, r := range []client.Reason{"", client.DayCap, client.WindowCap, client.PaceLimit, client.PaceGap} {
		if blocked[r] == 0 {
			t.Errorf("no candidate decided %q: %v", r, blocked)
		}
	}
}

// Cached dimensions are served from process memory, and a write through
// the counter invalidates them at once.
func TestDirectCachesHotDimensionsUntilTheyChange(t *testing.T) {
	reads := func() int64 { return testRedis.TotalCalls(t, "get") }
	c := newDirect(t, redisURL, client.Options{}, client.DirectOptions{CachedDims: []string{"bundle"}})
	bundle := fresh("com.cached")
	ids := client.Identities{"bundle": bundle}
	cands := []client.Candidate{{CID: "cc", Caps: []client.Cap{{Dim: "bundle", Day: 3}}}}
	for i := range 2 {
		count(fmt.Sprintf("cid=cc&bundle=%s&eid=%s-%d", bundle, bundle, i))
	}
	decide := func() client.Decision {
		t.Helper()
		got, err := c.Decide(context.Background(), ids, cands)
		if err != nil {
			t.Fatal(err)
		}
		return got[0]
	}
	if d := decide(); !d.Allowed || d.Degraded {
		t.Fatalf("2 of 3: %v", d)
	}
	before := reads()
	for range 100 {
		if d := decide(); !d.Allowed {
			t.Fatalf("2 of 3: %v", d)
		}
	}
	if after := reads(); after != before {
		t.Errorf("100 decisions on a cached dimension reached Redis: GET calls %d before, %d after", before, after)
	}
	count(fmt.Sprintf("cid=cc&bundle=%s&eid=%s-2", bundle, bundle))
	deadline := time.Now().Add(5 * time.Second)
	for d := decide(); d.Allowed; d = decide() {
		if time.Now().After(deadline) {
			t.Fatalf("the third win never reached the cached count: %v", d)
		}
		time.Sleep(time.Millisecond)
	}
}

// With Redis frozen, Decide answers by its deadline, fail-open or
// fail-closed, and decides on real counts again once Redis is back.
func TestDirectDeadlineWithRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	cands := []client.Candidate{{CID: "fz", Caps: []client.Cap{{Dim: "device", Day: 1}, {Dim: "bundle", Day: 1}}}}
	ids := client.Identities{"device": "d", "bundle": "b"}
	// Without last-known values: every count of a frozen Redis is degraded.
	open := newDirect(t, srv.URL(), client.Options{Timeout: 20 * time.Millisecond}, client.DirectOptions{StaleMax: -1})
	closed := newDirect(t, srv.URL(), client.Options{Timeout: 20 * time.Millisecond, FailClosed: true}, client.DirectOptions{StaleMax: -1})
	// A real decision from each first: a client's first call also opens its
	// connections (to every node of a cluster), which a loaded machine may
	// not finish within 20 ms.
	for _, c := range []*client.Client{open, closed} {
		waitRealDecision(t, c, ids, cands, "before the freeze")
	}
	srv.Pause()
	defer srv.Resume()
	for _, failClosed := range []bool{false, true} {
		c := open
		if failClosed {
			c = closed
		}
		for range 5 {
			start := time.Now()
			got, err := c.Decide(context.Background(), ids, cands)
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Errorf("fail-closed=%v: took %s with a 20 ms deadline", failClosed, took)
			}
			if err == nil || !got[0].Degraded || got[0].Allowed == failClosed {
				t.Errorf("fail-closed=%v: %v, err %v", failClosed, got[0], err)
			}
		}
	}
	srv.Resume()
	waitRealDecision(t, open, ids, cands, "after Redis came back")
}

// With Redis frozen, a direct Client answers from the counts it last read,
// as the counter does (COUNTER_STALE_MAX): the same decision, Stale, no
// error; a count it never read is degraded.
func TestDirectAnswersLastKnownWithRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	countBatchOn(t, srv, "lk", "seen")
	c := newDirect(t, srv.URL(), client.Options{Timeout: 50 * time.Millisecond}, client.DirectOptions{})
	seen := []client.Candidate{{CID: "lk", Caps: []client.Cap{{Dim: "device", Day: 1}}}}
	ids := client.Identities{"device": "seen"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Decide(context.Background(), ids, seen)
		if err == nil && !got[0].Degraded && !got[0].Allowed && got[0].Reason == client.DayCap {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fresh decision before the freeze: %v, %v", got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.Pause()
	defer srv.Resume()
	for range 5 {
		got, err := c.Decide(context.Background(), ids, seen)
		if err != nil || got[0].Degraded || !got[0].Stale || got[0].Allowed || got[0].Count != 1 {
			t.Fatalf("a known device with Redis frozen: %+v, %v; want blocked by its last-known count, stale", got[0], err)
		}
	}
	got, err := c.Decide(context.Background(), client.Identities{"device": "never-read"}, seen)
	if err == nil || !got[0].Degraded || !got[0].Allowed {
		t.Errorf("a device never read, Redis frozen: %+v, %v; want degraded, allowed (fail open)", got[0], err)
	}
}

// countHoursAgo counts wins of campaigns dx0..dx6 on devices dev-0..dev-5
// 3 to 12 hours ago, with the counting core the counter runs on a clock
// set back: their 24-hour windows then hold more than their 2-hour ones.
func countHoursAgo(t *testing.T, rng *rand.Rand) {
	t.Helper()
	rdb, err := redisconn.Open(redisURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for n := range 60 {
		ago := time.Now().Add(-time.Duration(3+rng.IntN(10)) * time.Hour)
		st := core.NewStore(rdb, core.Options{WriteTimeout: 5 * time.Second, Now: func() time.Time { return ago }}, nil)
		q := campaign.Query{CID: fmt.Sprint("dx", rng.IntN(7)), Event: "win", ReserveEvent: "win", Windows: []int{24},
			Dims: []campaign.Dim{{Name: "device", ID: fmt.Sprint("dev-", rng.IntN(6))}}, EID: fmt.Sprint("ago-", n)}
		_, err := campaign.Counters{Store: st, M: core.NopMetrics{}}.Incr(context.Background(), &q)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// countBatchOn counts one win of campaign cid for device in the Redis of
// srv, with the counting core the counter runs.
func countBatchOn(t *testing.T, srv *redistest.Server, cid, device string) {
	t.Helper()
	rdb, err := redisconn.Open(srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	st := core.NewStore(rdb, core.Options{WriteTimeout: 5 * time.Second}, nil)
	defer st.Close()
	it := counting.Item{Scope: counting.Scope{Campaign: cid, Event: "win"}, Subject: counting.Subject{Dim: "device", ID: device},
		Spec: counting.Spec{Kind: counting.Day, Span: 1}, Hits: 1}
	if r := st.Write(context.Background(), []counting.Item{it})[0]; r.Code != 0 {
		t.Fatalf("count: %+v", r)
	}
}

// waitRealDecision waits up to 10 s for a decision that is not degraded
// and allows the candidate.
func waitRealDecision(t *testing.T, c *client.Client, ids client.Identities, cands []client.Candidate, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.Decide(context.Background(), ids, cands)
		if err == nil && !got[0].Degraded && got[0].Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no real decision within 10 s %s: %v, %v", when, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFetchSchemaFeedsDirectOptions(t *testing.T) {
	s, err := client.FetchSchema(context.Background(), counterURL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Dimensions, ",") != "device,bundle,tagid,ip_ua,household" || s.Events[0] != "win" || s.MaxWindowHours != 168 {
		t.Errorf("schema: %+v", s)
	}
	if _, err := client.FetchSchema(context.Background(), counterURL, "wrong-token"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("with a wrong token: %v, want a 401", err)
	}
}

func TestDirectFromReplicasNeedsACluster(t *testing.T) {
	srv := redistest.StartSingle(t)
	if _, err := client.NewDirect(srv.URL(), client.Options{}, client.DirectOptions{FromReplicas: true}); err == nil || !strings.Contains(err.Error(), "not a cluster") {
		t.Errorf("FromReplicas on one server: %v, want an error saying it is not a cluster", err)
	}
}
