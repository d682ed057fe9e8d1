package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// declare stores a campaign's declared caps as callback's admin API does.
func declare(t *testing.T, srv *redistest.Server, cid string, caps ...counting.Cap) {
	t.Helper()
	c := newClient(t, srv.URL())
	args := append([]string{"HSET", campaign.Key(cid)}, campaign.Declaration{Caps: caps}.Fields()...)
	if err := raw(t, c, args...).Error(); err != nil {
		t.Fatal(err)
	}
}

// decide asks POST /v1/decide for device's candidates.
func decide(t *testing.T, base, device string, cids ...string) []counting.Verdict {
	t.Helper()
	req := counting.DecideRequest{Identities: map[string]string{"device": device}}
	for _, cid := range cids {
		req.Candidates = append(req.Candidates, counting.Candidate{CID: cid})
	}
	body, _ := json.Marshal(req)
	code, m := call(t, "POST", base+"/v1/decide", string(body))
	if code != 200 {
		t.Fatalf("decide: %d %v", code, m)
	}
	b, _ := json.Marshal(m)
	var out counting.DecideResponse
	if err := json.Unmarshal(b, &out); err != nil || len(out.Results) != len(cids) {
		t.Fatalf("decide answer %s: %v", b, err)
	}
	return out.Results
}

// The bidder asks once per bid request with campaign ids: the counter
// reads their declared caps and answers each allowed or blocked by the
// first cap at its limit, naming it; an unknown campaign is allowed
// (10002); an edit of the caps changes the next answer without a restart.
func TestDecideByCampaignIDs(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	day := func(event string, limit int64) counting.Cap {
		return counting.Cap{Level: "campaign", Event: event, Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: limit}
	}
	hours := counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 24}, Limit: 10}
	gap := counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "seconds", N: 600, MinGapSec: 300}, Limit: 5}
	declare(t, srv, "d1", day("win", 2))
	declare(t, srv, "d2", day("win", 5))
	declare(t, srv, "d3", hours, day("win", 1)) // the day blocks first: it is the one named
	declare(t, srv, "d4", gap)
	declare(t, srv, "d5", day("imp", 1))
	for i := range 2 {
		for _, cid := range []string{"d1", "d2", "d3"} {
			call(t, "POST", fmt.Sprintf("%s/v1/incr?cid=%s&device=dv&windowHours=24&eid=e%d", base, cid, i), "")
		}
	}
	call(t, "POST", base+"/v1/incr?cid=d4&device=dv&paceWindowSec=600&eid=g1", "")
	got := decide(t, base, "dv", "d1", "d2", "d3", "d4", "d5", "nobody")
	want := []struct {
		allowed bool
		cap     *counting.Cap
		count   int64
		code    int
	}{{false, &[]counting.Cap{day("win", 2)}[0], 2, 0}, {true, nil, 0, 0}, {false, &[]counting.Cap{day("win", 1)}[0], 2, 0}, {false, &gap, -1, 0}, {true, nil, 0, 0}, {true, nil, 0, 10002}}
	for i, w := range want {
		g := got[i]
		if g.Allowed != w.allowed || g.Code != w.code || (w.cap == nil) != (g.Cap == nil) || w.cap != nil && *g.Cap != *w.cap ||
			w.count >= 0 && g.Count != w.count || g.Degraded {
			t.Errorf("candidate %s: %+v (cap %+v), want allowed %v, cap %+v, count %d, code %d", g.CID, g, g.Cap, w.allowed, w.cap, w.count, w.code)
		}
	}
	if g := got[3]; g.Count < 0 || g.Count > 300_000 {
		t.Errorf("d4 blocked by its minimum gap %d ms after the last win, want within the 300 s gap", g.Count)
	}
	// An edit reaches the next decide: client-side caching is invalidated.
	declare(t, srv, "d1", day("win", 5))
	for deadline := time.Now().Add(5 * time.Second); !decide(t, base, "dv", "d1")[0].Allowed; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("d1 still blocked 5 s after its cap was raised")
		}
	}
	// Bad requests are 400 naming the field.
	for body, wantMsg := range map[string]string{
		`{"identities":{"devise":"x"},"candidates":[{"cid":"d1"}]}`:  "identities: unknown dimension",
		`{"identities":{"device":"x"},"candidates":[]}`:              "candidates must hold 1 to",
		`{"identities":{"device":"x"},"candidates":[{"cid":"a:b"}]}`: "candidates[0].cid",
	} {
		code, m := call(t, "POST", base+"/v1/decide", body)
		if msg, _ := m["msg"].(string); code != 400 || !strings.Contains(msg, wantMsg) {
			t.Errorf("%s: %d %v, want 400 naming %s", body, code, m, wantMsg)
		}
	}
}
