package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// declareCaps stores a campaign's caps through callback's admin API.
func declareCaps(t testing.TB, cid string, caps []client.DeclaredCap) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"caps": caps})
	req, err := http.NewRequest(http.MethodPut, adminURL+"/v1/campaigns/"+cid, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		t.Fatalf("declare %s: %d", cid, resp.StatusCode)
	}
}

// DecideIDs over HTTP (the counter's /v1/decide) and in direct mode (the
// same code in this process) give the same decisions on random declared
// caps, counts and candidate lists, naming the declared cap that blocks.
func TestDecideIDsDirectAgreesWithHTTP(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 34))
	pick := func(prefix string, n int) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(n)) }
	for c := range 6 {
		var caps []client.DeclaredCap
		for range 1 + rng.IntN(3) {
			cp := client.DeclaredCap{Level: "campaign", Event: "win", Dim: "device", Limit: int64(1 + rng.IntN(8))}
			switch rng.IntN(3) {
			case 0:
				cp.Window = counting.CapWindow{Unit: "day", N: 1}
				cp.Limit += 6 // longer windows, larger limits: every kind of cap gets to be the strictest at its limit
			case 1:
				cp.Window = counting.CapWindow{Unit: "hours", N: []int{2, 24}[rng.IntN(2)]}
				cp.Limit += 3
			default:
				cp.Window = counting.CapWindow{Unit: "seconds", N: 3600, MinGapSec: rng.IntN(2) * 3600}
			}
			caps = append(caps, cp)
		}
		if c == 5 { // one campaign whose only cap is an exact window without a gap
			caps = []client.DeclaredCap{{Level: "campaign", Event: "win", Dim: "device", Limit: 2, Window: counting.CapWindow{Unit: "seconds", N: 3600}}}
		}
		declareCaps(t, fmt.Sprintf("di%d", c), caps)
	}
	var notices []counting.BatchItem
	for i := range 300 {
		notices = append(notices, counting.BatchItem{CID: pick("di", 6), Dims: map[string]string{"device": pick("dev-", 5)},
			WindowHours: []int{24}, PaceWindowSec: 3600, EID: fmt.Sprintf("di-%d", i)})
	}
	for i := 0; i < len(notices); i += 100 {
		countBatch(t, notices[i:i+100])
	}

	viaHTTP := newClient(t, client.Options{})
	direct := newDirect(t, redisURL, client.Options{}, client.DirectOptions{})
	seen := map[string]int{}
	for call := range 200 {
		ids := client.Identities{"device": pick("dev-", 6)}
		if rng.IntN(12) == 0 {
			ids["device"] = "not an id" // refused: every candidate degraded
		}
		cids := make([]string, 1+rng.IntN(8))
		for i := range cids {
			cids[i] = pick("di", 7) // di6 declares nothing
		}
		want, werr := viaHTTP.DecideIDs(context.Background(), ids, cids)
		got, gerr := direct.DecideIDs(context.Background(), ids, cids)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("call %d: HTTP error %v, direct error %v", call, werr, gerr)
		}
		for i := range want {
			w, g := want[i], got[i]
			if w.Reason == client.PaceGap {
				w.Count, g.Count = 0, 0 // milliseconds since the last event, on each call's clock
			}
			if fmt.Sprintf("%+v %+v", w, w.Declared) != fmt.Sprintf("%+v %+v", g, g.Declared) {
				t.Fatalf("call %d, %s (ids %v):\nHTTP   %+v %+v\ndirect %+v %+v", call, cids[i], ids, w, w.Declared, g, g.Declared)
			}
			if !w.Allowed && (w.Declared == nil || w.Declared.Limit != w.Limit && w.Reason != client.PaceGap) {
				t.Fatalf("call %d, %s blocked without its cap: %+v", call, cids[i], w)
			}
			switch {
			case w.Degraded:
				seen["degraded"]++
			case w.Unknown:
				seen["unknown"]++
			default:
				seen[string(w.Reason)]++
			}
		}
	}
	for _, k := range []string{"", "degraded", "unknown", string(client.DayCap), string(client.WindowCap), string(client.PaceLimit), string(client.PaceGap)} {
		if seen[k] == 0 {
			t.Errorf("no candidate decided %q: %v", k, seen)
		}
	}
}

// A bid reserved over HTTP is counted by a direct client's decide and one
// reserved in-process by the counter's, each only when asked to count
// reservations; the bid's win, written with release, turns it into the
// count.
func TestReserveDirectAndHTTPAlike(t *testing.T) {
	declareCaps(t, "rs", []client.DeclaredCap{{Level: "campaign", Event: "win", Dim: "device", Limit: 1,
		Window: counting.CapWindow{Unit: "day", N: 1}}})
	viaHTTP := newClient(t, client.Options{CountReserved: true})
	direct := newDirect(t, redisURL, client.Options{CountReserved: true}, client.DirectOptions{})
	plain := newClient(t, client.Options{})
	ctx := context.Background()
	for i, c := range []struct{ reserve, decide *client.Client }{{viaHTTP, direct}, {direct, viaHTTP}} {
		dev := fresh(fmt.Sprintf("rs-dev-%d", i))
		ids := client.Identities{"device": dev}
		got, err := c.reserve.Reserve(ctx, ids, []client.Creative{{CID: "rs"}}, "bid-"+dev, 0)
		if err != nil || len(got) != 1 || got[0].Counters != 1 {
			t.Fatalf("case %d: Reserve: %+v %v", i, got, err)
		}
		if d, err := c.decide.DecideIDs(ctx, ids, []string{"rs"}); err != nil || d[0].Allowed || d[0].Reserved != 1 {
			t.Errorf("case %d: decide counting reservations: %+v %v, want blocked on 1 reserved", i, d, err)
		}
		if d, _ := plain.DecideIDs(ctx, ids, []string{"rs"}); !d[0].Allowed {
			t.Errorf("case %d: decide not counting reservations: %+v, want allowed", i, d)
		}
		countBatch(t, []counting.BatchItem{{CID: "rs", Dims: map[string]string{"device": dev}, EID: "bid-" + dev, Release: true}})
		if d, err := c.decide.DecideIDs(ctx, ids, []string{"rs"}); err != nil || d[0].Allowed || d[0].Reserved != 0 || d[0].Count != 1 {
			t.Errorf("case %d: after the win: %+v %v, want blocked by the count alone", i, d, err)
		}
	}
}

// The counter's verdicts are read in place: a blocked one with its cap, an
// allowed one, one of a campaign that declares nothing.
func TestDecideIDsReadsTheCountersVerdictsInPlace(t *testing.T) {
	declareCaps(t, "plainv1", []client.DeclaredCap{{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 1}})
	declareCaps(t, "plainv2", []client.DeclaredCap{{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 3}, Limit: 5}})
	countBatch(t, []counting.BatchItem{{CID: "plainv1", Dims: map[string]string{"device": "plainv-dev"}, EID: "plainv-1"}})
	req := counting.DecideRequest{Identities: map[string]string{"device": "plainv-dev"},
		Candidates: []counting.Candidate{{CID: "plainv1"}, {CID: "plainv2", CRID: "cr-1"}, {CID: "plainv-none"}}}
	body := postCounter(t, "/v1/decide", client.DecideIDsBody(&req))
	got, ok := client.PlainVerdicts(body, req.Candidates)
	if !ok {
		t.Fatalf("the counter's verdicts are not read in their plain form: %s", body)
	}
	var want counting.DecideResponse
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want.Results) {
		t.Fatalf("in place %+v\ndecoded  %+v", got, want.Results)
	}
	if got[0].Allowed || got[0].Cap == nil || got[0].Reason != "day_cap" || !got[1].Allowed || got[2].Code != 10002 {
		t.Errorf("not the verdicts of a blocked, an allowed and an unknown campaign: %s", body)
	}
}
