package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/freqcap/freqcap/campaign"
	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// declare stores a campaign's declared caps as callback's admin API does.
func declare(t testing.TB, srv *redistest.Server, cid string, caps ...counting.Cap) {
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
	// Counted by result, and a block by the blocking cap's level and window.
	mresp, err := http.Get(opsURL(t, base) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		`freqcap_counter_decide_verdicts_total{level="campaign",result="blocked",window="day"} 2`,
		`freqcap_counter_decide_verdicts_total{level="campaign",result="blocked",window="seconds"} 1`,
		`freqcap_counter_decide_verdicts_total{level="none",result="allowed",window="none"} 2`,
		`freqcap_counter_decide_verdicts_total{level="none",result="unknown",window="none"} 1`,
	} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
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

// capModel decides a candidate as the declared caps say, from the events
// themselves: plain Go, no counters.
type capModel struct {
	events []modelEvent
}

type modelEvent struct {
	atMs                 int64
	cid, adv, event, dev string
}

// decide is the model's verdict for a candidate of campaign cid of
// advertiser adv: of the caps whose count reached their limit, the one
// that blocks longest (a day 24 h, a week 7 days, a month 31, n hours,
// an exact window its length, a minimum gap the gap), the first of equals.
func (m *capModel) decide(now time.Time, cid, adv, dev string, caps []counting.Cap) (bool, *counting.Cap, int64) {
	var worst *counting.Cap
	var worstCount, worstSec int64
	for k := range caps {
		blocked, count, sec := m.blocks(now, cid, adv, dev, &caps[k])
		if blocked && (worst == nil || sec > worstSec) {
			worst, worstCount, worstSec = &caps[k], count, sec
		}
	}
	if worst == nil {
		return true, nil, 0
	}
	return false, worst, worstCount
}

// blocks says whether one cap blocks, with its count (for a minimum gap,
// the milliseconds since the last event) and how long it may block.
func (m *capModel) blocks(now time.Time, cid, adv, dev string, cp *counting.Cap) (bool, int64, int64) {
	nowMs, hour := now.UnixMilli(), now.Unix()/3600
	{
		var count, last int64
		for _, e := range m.events {
			mine := e.cid == cid
			if cp.Level == campaign.LevelAdvertiser {
				mine = e.adv == adv
			}
			if !mine || e.event != cp.Event || e.dev != dev {
				continue
			}
			at := time.UnixMilli(e.atMs).UTC()
			switch cp.Window.Unit {
			case campaign.UnitDay, campaign.UnitWeek, campaign.UnitMonth:
				// This period and the n-1 before, from the calendar.
				if !at.Before(periodStart(now, time.UTC, campaign.PeriodKind(cp.Window.Unit), cp.Window.N-1)) {
					count++
				}
			case campaign.UnitLifetime:
				count++ // the campaign ends long after the stream
			case campaign.UnitHours:
				if h := e.atMs / 1000 / 3600; h > hour-int64(cp.Window.N) && h <= hour {
					count++
				}
			default:
				span := int64(cp.Window.N) * 1000
				if cp.Window.Unit == campaign.UnitMinutes {
					span *= 60
				}
				if e.atMs >= nowMs-span {
					count++
					last = max(last, e.atMs)
				}
			}
		}
		if gap := int64(cp.Window.MinGapSec) * 1000; gap > 0 && last > 0 && nowMs-last < gap {
			return true, nowMs - last, int64(cp.Window.MinGapSec)
		}
		n := int64(cp.Window.N)
		sec := map[string]int64{campaign.UnitLifetime: math.MaxInt64, campaign.UnitDay: n * 86400, campaign.UnitWeek: n * 7 * 86400, campaign.UnitMonth: n * 31 * 86400,
			campaign.UnitHours: 3600 * int64(cp.Window.N), campaign.UnitMinutes: 60 * int64(cp.Window.N), campaign.UnitSeconds: int64(cp.Window.N)}[cp.Window.Unit]
		return count >= cp.Limit, count, sec
	}
}

// monday is the start of t's week (UTC).
func monday(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()-(int(t.Weekday())+6)%7, 0, 0, 0, 0, time.UTC)
}

// randomCaps declares 1 to 12 caps on win and imp at the campaign and
// advertiser levels: days, weeks, months, hours and one exact window per
// level and event (the one length a level's event may have, shared with
// the other campaigns through exact).
func randomCaps(rng *rand.Rand, exact map[[2]string]counting.CapWindow) []counting.Cap {
	var caps []counting.Cap
	for range 1 + rng.IntN(12) {
		ev := []string{"win", "imp"}[rng.IntN(2)]
		level := []string{campaign.LevelCampaign, campaign.LevelCampaign, campaign.LevelAdvertiser}[rng.IntN(3)]
		c := counting.Cap{Level: level, Event: ev, Dim: "device", Limit: int64(1 + rng.IntN(12))}
		switch rng.IntN(4) {
		case 0:
			c.Window = counting.CapWindow{Unit: []string{campaign.UnitDay, campaign.UnitWeek, campaign.UnitMonth, campaign.UnitLifetime}[rng.IntN(4)], N: 1}
			if c.Window.Unit == campaign.UnitLifetime && level != campaign.LevelCampaign {
				c.Window.Unit = campaign.UnitMonth // a lifetime is a campaign's
			}
			if c.Window.Unit != campaign.UnitLifetime && rng.IntN(3) == 0 {
				c.Window.N = 2 + rng.IntN(2) // this one and the one or two before
			}
			c.Limit += 8 + int64(rng.IntN(3))*6 // longer periods, larger limits
		case 3:
			c.Window = counting.CapWindow{Unit: campaign.UnitWeek, N: 1}
			c.Limit += 12
		case 1:
			c.Window = counting.CapWindow{Unit: campaign.UnitHours, N: 1 + rng.IntN(6)}
		default:
			key := [2]string{level, ev}
			w, ok := exact[key]
			if !ok {
				w = counting.CapWindow{Unit: campaign.UnitSeconds, N: 60 + rng.IntN(600)}
				if rng.IntN(2) == 0 {
					w = counting.CapWindow{Unit: campaign.UnitMinutes, N: 1 + rng.IntN(10)}
				}
				exact[key] = w
			}
			w.MinGapSec = rng.IntN(3) * 30
			c.Window, c.Limit = w, int64(1+rng.IntN(3))
		}
		caps = append(caps, c)
	}
	return caps
}

// Deciding by declared caps agrees with a plain model of the caps decision
// by decision: random declarations, random events counted as callback
// counts them (each event in the windows its campaign's caps need), random
// decides of every candidate for one device, the clock moving by up to a
// minute a step across several hours.
func TestDecideAgreesWithModel(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	// Hot keys off: a device read hundreds of times a second would go
	// through client-side caching, whose invalidation may arrive just
	// after the next read of a write made a moment before; the model
	// compares exact counts.
	v, _ := testStore(t, srv, clk, "COUNTER_MAX_WINDOW_HOURS=24", "COUNTER_HOT_KEY_RATE=0")
	rng := rand.New(rand.NewPCG(5, 6))
	decls := map[string]*campaign.Declaration{}
	var cands []counting.Candidate
	exact := map[[2]string]counting.CapWindow{}
	for c := range 6 {
		cid := fmt.Sprintf("m%d", c)
		decls[cid] = &campaign.Declaration{Advertiser: fmt.Sprintf("a%d", c%2), End: "2027-06-30", Caps: randomCaps(rng, exact)}
		if c == 5 { // one campaign with a lifetime cap for sure
			decls[cid].Caps = append(decls[cid].Caps, counting.Cap{Level: campaign.LevelCampaign, Event: "win", Dim: "device",
				Window: counting.CapWindow{Unit: campaign.UnitLifetime}, Limit: 9})
		}
		cands = append(cands, counting.Candidate{CID: cid})
	}
	m := &capModel{}
	ctx := t.Context()
	decided, blocked, later := 0, 0, 0
	reasons := map[string]int{}
	for step := range 1500 {
		clk.Add(time.Duration(rng.IntN(60_000)) * time.Millisecond)
		if step%150 == 149 {
			clk.Add(9 * time.Hour) // across days, and now and then a week
		}
		dev := fmt.Sprintf("d%d", rng.IntN(6))
		if rng.IntN(3) > 0 {
			cid, ev := cands[rng.IntN(len(cands))].CID, []string{"win", "imp"}[rng.IntN(2)]
			q := countedAsCallbackDoes(decls, cid, ev, dev, fmt.Sprint("e", step))
			if _, errs := v.IncrBatch(ctx, []campaign.Query{q}); errs[0] != nil {
				t.Fatalf("step %d: incr %+v: %v", step, q, errs[0])
			}
			m.events = append(m.events, modelEvent{clk.Now().UnixMilli(), cid, decls[cid].Advertiser, ev, dev})
			continue
		}
		got := v.Decide(ctx, map[string]string{"device": dev}, cands, decls)
		for _, g := range got {
			if !g.Allowed && g.Cap.Level == campaign.LevelAdvertiser {
				reasons["advertiser"]++
			}
			if !g.Allowed && g.Cap.Window.N > 1 && campaign.PeriodKind(g.Cap.Window.Unit) != "" {
				reasons["periods"]++
			}
			allowed, cp, count := m.decide(clk.Now(), g.CID, decls[g.CID].Advertiser, dev, decls[g.CID].Caps)
			if g.Allowed != allowed || (cp == nil) != (g.Cap == nil) || cp != nil && (*cp != *g.Cap || count != g.Count) || g.Degraded || g.Code != 0 {
				t.Fatalf("step %d at %s, %s for %s (caps %+v): %+v (cap %+v), model allowed %v cap %+v count %d",
					step, clk.Now().Format(time.TimeOnly), g.CID, dev, decls[g.CID].Caps, g, g.Cap, allowed, cp, count)
			}
			decided++
			reasons[g.Reason]++
			if !allowed {
				blocked++
				if cp != &decls[g.CID].Caps[0] {
					later++ // an earlier cap was under its limit: the one named is not simply the first
				}
			}
		}
	}
	// The stream must have exercised both answers.
	if blocked == 0 || blocked == decided || later == 0 {
		t.Fatalf("%d of %d decisions blocked, %d by a cap after the first: the stream decides too little", blocked, decided, later)
	}
	for _, r := range []string{campaign.ReasonDay, campaign.ReasonWeek, campaign.ReasonMonth, campaign.ReasonLifetime, campaign.ReasonWindow, campaign.ReasonPaceLimit, campaign.ReasonPaceGap, "advertiser", "periods"} {
		if reasons[r] == 0 {
			t.Errorf("no decision blocked by %s: %v", r, reasons)
		}
	}
	t.Logf("%d decisions, %d blocked, %d by a cap after the first; %v", decided, blocked, later, reasons)
}

// countedAsCallbackDoes is the write callback makes of one notice: at
// the campaign in what its caps need, and at its advertiser in what the
// advertiser caps of all the advertiser's campaigns need.
func countedAsCallbackDoes(decls map[string]*campaign.Declaration, cid, ev, dev, eid string) campaign.Query {
	d := decls[cid]
	need := d.Need(ev)
	q := campaign.Query{CID: cid, Event: ev, Dims: []campaign.Dim{{Name: "device", ID: dev}}, PaceWindowSec: need.PaceSec,
		Week: need.Week, Month: need.Month, EID: eid}
	if need.Hours > 0 {
		q.Windows = []int{need.Hours}
	}
	if need.Lifetime {
		q.LifetimeEnd, _ = d.EndUnix()
	}
	q.Periods = need.PeriodList()
	var adv campaign.Need
	for _, o := range decls {
		if o.Advertiser == d.Advertiser {
			adv = adv.Union(campaign.Needs(o.Caps, campaign.LevelAdvertiser)[ev])
		}
	}
	if len(adv.Dims) > 0 {
		a := campaign.Query{CID: d.Advertiser, Level: campaign.LevelAdvertiser, Dims: q.Dims, PaceWindowSec: adv.PaceSec, Week: adv.Week, Month: adv.Month,
			Periods: adv.PeriodList()}
		if adv.Hours > 0 {
			a.Windows = []int{adv.Hours}
		}
		q.Also = []campaign.Query{a}
	}
	return q
}

// With Redis frozen, a decide answers within the deadline, per candidate:
// on last-known declarations and counts (stale) for campaigns read
// before, failing open (degraded) for one never read.
func TestDecideWithRedisFrozen(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_READ_TIMEOUT=30ms")
	day := func(limit int64) counting.Cap {
		return counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: limit}
	}
	declare(t, srv, "fz1", day(1))
	declare(t, srv, "fz2", day(5))
	declare(t, srv, "fz3", day(1))
	call(t, "POST", base+"/v1/incr?cid=fz1&device=dv&eid=fz-1", "")
	call(t, "POST", base+"/v1/incr?cid=fz3&device=dv&eid=fz-3", "")
	before := decide(t, base, "dv", "fz1", "fz2")
	if before[0].Allowed || !before[1].Allowed || before[0].Stale || before[0].Degraded {
		t.Fatalf("before the freeze: %+v", before)
	}
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	got := decide(t, base, "dv", "fz1", "fz2", "fz3")
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("decide with Redis frozen took %s", took)
	}
	if g := got[0]; g.Allowed || !g.Stale || g.Degraded || g.Count != 1 {
		t.Errorf("fz1 (blocked before): %+v", g)
	}
	if g := got[1]; !g.Allowed || !g.Stale || g.Degraded {
		t.Errorf("fz2 (allowed before): %+v", g)
	}
	if g := got[2]; !g.Allowed || !g.Degraded || g.Code != 10001 {
		t.Errorf("fz3 (never read: fails open): %+v", g)
	}
}

// A candidate is stale when its own declaration is a last-known copy, not
// when another candidate's is: with one declaration unreadable (a String
// written by hand over its hash), that candidate decides on its last-known
// declaration, stale, and the other on what Redis answered now.
func TestDecideMarksStaleOnlyTheLastKnownDeclarations(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	day := func(limit int64) counting.Cap {
		return counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: limit}
	}
	declare(t, srv, "ok1", day(1))
	declare(t, srv, "gone", day(5))
	call(t, "POST", base+"/v1/incr?cid=ok1&device=dv&eid=ok-1", "")
	if v := decide(t, base, "dv", "ok1", "gone"); v[0].Allowed || !v[1].Allowed || v[0].Stale || v[1].Stale {
		t.Fatalf("both declarations read: %+v", v)
	}
	if err := raw(t, newClient(t, srv.URL()), "SET", campaign.Key("gone"), "not a hash").Error(); err != nil {
		t.Fatal(err)
	}
	// Once the counter's cached copy is invalidated, "gone" decides on its
	// last-known declaration.
	var v []counting.Verdict
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v = decide(t, base, "dv", "ok1", "gone"); v[1].Stale || time.Now().After(deadline) {
			break
		}
	}
	if g := v[1]; !g.Stale || !g.Allowed || g.AgeMs < 1 {
		t.Errorf("the unreadable declaration: %+v, want allowed on its last-known copy, stale", g)
	}
	if g := v[0]; g.Stale || g.Allowed || g.Count != 1 {
		t.Errorf("the declaration Redis answered: %+v, want blocked on the count of 1, not stale", g)
	}
}

// The Caps RPC answers as POST /v1/decide does, over gRPC and Connect
// JSON, and refuses bad input with InvalidArgument naming the field.
func TestDecideRPC(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	capDay := counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 1}
	declare(t, srv, "r1", capDay)
	declare(t, srv, "r2", counting.Cap{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 2}, Limit: 3})
	call(t, "POST", base+"/v1/incr?cid=r1&device=dv&windowHours=2&eid=r-1", "")
	want := decide(t, base, "dv", "r1", "r2", "nobody")
	for name, c := range map[string]freqcapv1connect.CapsClient{
		"grpc":         freqcapv1connect.NewCapsClient(h2c(), base, connect.WithGRPC()),
		"connect-json": freqcapv1connect.NewCapsClient(http.DefaultClient, base, connect.WithProtoJSON()),
	} {
		t.Run(name, func(t *testing.T) {
			req := &freqcapv1.DecideReq{Identities: map[string]string{"device": "dv"},
				Candidates: []*freqcapv1.DecideCandidate{{Cid: "r1"}, {Cid: "r2"}, {Cid: "nobody"}}}
			rsp, err := c.Decide(t.Context(), connect.NewRequest(req))
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range rsp.Msg.GetResults() {
				w := want[i]
				if g.GetCid() != w.CID || g.GetAllowed() != w.Allowed || int(g.GetCode()) != w.Code || g.GetReason() != w.Reason ||
					g.GetCount() != w.Count || (g.GetCap() == nil) != (w.Cap == nil) || w.Cap != nil && g.GetCap().GetLimit() != w.Cap.Limit {
					t.Errorf("candidate %d: %v, over HTTP %+v", i, g, w)
				}
			}
			if rsp.Msg.GetResults()[0].GetCap().GetWindow().GetUnit() != "day" {
				t.Errorf("r1's cap: %v", rsp.Msg.GetResults()[0].GetCap())
			}
			req.Candidates[1].Cid = "bad cid"
			_, err = c.Decide(t.Context(), connect.NewRequest(req))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "candidates[1].cid") {
				t.Errorf("a bad cid: %v, want InvalidArgument naming candidates[1].cid", err)
			}
		})
	}
}

// /v1/incr and /v1/freq count and read this week and this month with
// week=true and month=true; a value that is not a boolean is refused
// naming the parameter, and pace takes neither.
func TestWeekAndMonthOverHTTP(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	for i := range 2 {
		code, m := call(t, "POST", fmt.Sprintf("%s/v1/incr?cid=wm&device=d&week=true&month=1&eid=wm-%d", base, i), "")
		if code != 200 {
			t.Fatalf("incr: %d %v", code, m)
		}
	}
	call(t, "POST", base+"/v1/incr?cid=wm&device=d&week=true&eid=wm-3", "")
	_, m := call(t, "GET", base+"/v1/freq?cid=wm&device=d&week=true&month=true", "")
	expect(t, m, map[string]any{"counts.device.day": 3, "counts.device.week": 3, "counts.device.month": 2})
	_, m = call(t, "GET", base+"/v1/freq?cid=wm&device=d", "")
	if c := m["counts"].(map[string]any)["device"].(map[string]any); c["week"] != nil || c["month"] != nil {
		t.Errorf("a read that asked for neither answers %v", c)
	}
	for _, u := range []string{"/v1/freq?cid=wm&device=d&week=maybe", "/v1/pace?cid=wm&device=d&windowSec=60&limit=1&month=true"} {
		method := "GET"
		if strings.HasPrefix(u, "/v1/pace") {
			method = "POST"
		}
		code, m := call(t, method, base+u, "")
		if code != 400 || !strings.Contains(fmt.Sprint(m["msg"]), map[bool]string{true: "month", false: "week"}[method == "POST"]) {
			t.Errorf("%s: %d %v, want 400 naming the parameter", u, code, m)
		}
	}
}
