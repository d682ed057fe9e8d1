package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// A device counter holding one event in each of the last 10 hours reads 10
// for 24 hours; a writer counting for a 3-hour window (a campaign whose
// winLimitHours was lowered, or a second writer) must not shrink what the
// next 24-hour read sees.
func TestShorterWriterDoesNotShrinkLongerRead(t *testing.T) {
	srv := redistest.Start(t)
	now := time.Date(2026, 12, 2, 12, 30, 0, 0, time.UTC)
	clk := newClock(now)
	st, _ := testStore(t, srv, clk)
	rc := newClient(t, srv.URL())
	q := Query{CID: "42", Event: "win", Windows: []int{24}, Dims: []Dim{{Name: "device", ID: "d"}}}
	for ago := 9; ago >= 0; ago-- {
		clk.Set(now.Add(-time.Duration(ago) * time.Hour))
		mustIncr(t, st, q)
	}
	clk.Set(now)
	read := func() int64 {
		t.Helper()
		res := st.Read(context.Background(), []Query{q})[0]
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res.Counts[0].Windows[0]
	}
	if n := read(); n != 10 {
		t.Fatalf("24 h read before = %d, want 10", n)
	}
	mustIncr(t, st, Query{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "d"}}})
	if n := read(); n != 11 {
		t.Errorf("24 h read after a 3 h write = %d, want 11", n)
	}
	if n := rawInt(t, rc, "HLEN", "hfreq:{win:device:42:d}"); n != 10 {
		t.Errorf("hash has %d fields after the 3 h write, want all 10 kept", n)
	}
	if ttl := rawInt(t, rc, "PTTL", "hfreq:{win:device:42:d}"); ttl < 168*3600_000 {
		t.Errorf("hash TTL %d ms after the 3 h write, want the configured retention (169 h)", ttl)
	}
}

// A read asking for more hours than the counter keeps is refused, never
// answered with a smaller number.
func TestReadPastRetentionIsRefused(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_MAX_WINDOW_HOURS=24")
	for _, tt := range []struct{ method, path, body, want string }{
		{"GET", "/v1/freq?cid=1&device=d&windowHours=25", "", "windowHours must be between 0 and 24"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"windowHours":[2,48]}]}`, "items[0].windowHours must be between 1 and 24"},
		{"POST", "/v1/items", `{"items":[{"scope":{"campaign":"1"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"hours","span":25},"hits":0}]}`, "items[0].spec.span must be between 1 and 24 hours"},
	} {
		code, m := call(t, tt.method, base+tt.path, tt.body)
		if msg, _ := m["msg"].(string); code != 400 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s %s: %d %v, want 400 naming %q", tt.method, tt.path, code, m, tt.want)
		}
	}
}

// Ids may hold '}' and ':'. A notice for device "x}:y" with eid "z" and one
// for device "x" with eid "y}:z" are two events on two counters: both count.
func TestKeysOfDifferentCountersNeverCollide(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)))
	rc := newClient(t, srv.URL())
	a := mustIncr(t, st, Query{CID: "1", Event: "win", Windows: []int{3}, EID: "z", Dims: []Dim{{Name: "device", ID: "x}:y"}}})
	b := mustIncr(t, st, Query{CID: "1", Event: "win", Windows: []int{3}, EID: "y}:z", Dims: []Dim{{Name: "device", ID: "x"}}})
	if a.Duplicate || b.Duplicate || a.Counts[0].Day != 1 || b.Counts[0].Day != 1 {
		t.Fatalf("first %+v, second %+v: want both counted once, neither a duplicate", a, b)
	}
	for key, want := range map[string]int64{
		"freq:{win:device:1:x%7D%3Ay}": 1,
		"freq:{win:device:1:x}":        1,
	} {
		if n := rawInt(t, rc, "GET", key); n != want {
			t.Errorf("GET %s = %d, want %d", key, n, want)
		}
	}
	// Each dimension remembers its event once, for its day and its hours
	// (bits 1 and 2 of the score).
	for key, eid := range map[string]string{"dedup:{win:device:1:x%7D%3Ay}": "z", "dedup:{win:device:1:x}": "y}:z"} {
		if n := rawInt(t, rc, "ZCARD", key); n != 1 {
			t.Errorf("ZCARD %s = %d, want 1", key, n)
		}
		score, err := raw(t, rc, "ZSCORE", key, eid).AsFloat64()
		if err != nil || int64(score)%4 != 3 {
			t.Errorf("ZSCORE %s %q = %v, %v: want the day's and the hours' bits (3)", key, eid, score, err)
		}
	}
}

// Every key of one counter carries the counter's whole tag as its Cluster
// hash tag: the part between the first '{' and the first '}' after it.
func TestEveryKeyOfACounterSharesItsHashTag(t *testing.T) {
	for _, it := range []counting.Item{
		{Scope: counting.Scope{Campaign: "42", Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "a}b{c:d%e"}, EventID: "e}1:{x"},
		{Scope: counting.Scope{Business: 7}, Subject: counting.Subject{ID: "user:{1}"}, EventID: "r:1}"},
	} {
		want := hashTag(core.Tagged("", &it))
		if strings.ContainsAny(strings.Trim(want, "{}"), "{}") {
			t.Errorf("tag %q holds a brace", want)
		}
		for _, key := range []string{core.Window(&it), core.Hours(&it), core.Sliding(&it), core.Dedupe(&it)} {
			if got := hashTag(key); got != want {
				t.Errorf("key %q: hash tag %q, want %q", key, got, want)
			}
		}
	}
}

// hashTag is what Redis Cluster hashes: the part of key between the first
// '{' and the first '}' after it, when that part is not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return "{" + key[i+1:i+1+j] + "}"
}

func TestItemsEndpoint(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	write := `{"items":[
		{"scope":{"campaign":"42","event":"win"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":1,"eventId":"a1"},
		{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"hours","span":3},"hits":2},
		{"scope":{"business":7},"subject":{"id":"user:1"},"spec":{"kind":"seconds","span":60},"hits":1},
		{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"sliding","span":600,"limit":1},"hits":1,"eventId":"a1"},
		{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"sliding","span":600,"limit":1},"hits":1,"eventId":"a2"}]}`
	code, m := call(t, "POST", base+"/v1/items", write)
	if code != 200 {
		t.Fatalf("write: %d %v", code, m)
	}
	expect(t, m, map[string]any{
		"code": 0, "results.0.count": 1, "results.0.allowed": true, "results.1.count": 2,
		"results.2.count": 1, "results.3.count": 1, "results.4.allowed": false, "results.4.reason": "over_limit",
	})
	if ttl, _ := path(m, "results.2.ttlMs").(float64); ttl <= 59_000 || ttl > 60_000 {
		t.Errorf("seconds window ttlMs = %v, want about 60000", ttl)
	}
	_, m = call(t, "POST", base+"/v1/items", write)
	expect(t, m, map[string]any{"results.0.duplicate": true, "results.0.count": 1, "results.1.count": 4, "results.3.duplicate": true})

	code, m = call(t, "POST", base+"/v1/items", `{"items":[
		{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":0},
		{"scope":{"business":7},"subject":{"id":"user:1"},"spec":{"kind":"seconds"},"hits":0},
		{"scope":{"business":7},"subject":{"id":"never"},"spec":{"kind":"day"},"hits":0}]}`)
	if code != 200 {
		t.Fatalf("read: %d %v", code, m)
	}
	expect(t, m, map[string]any{"results.0.count": 1, "results.0.degraded": false, "results.1.count": 2, "results.2.code": 10002, "results.2.count": 0})

	for _, tt := range []struct{ body, want string }{
		{`{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":1},{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":0}]}`, "items[1].hits: a batch is all reads"},
		{`{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"fortnight","span":1},"hits":1}]}`, "items[0].spec.kind must be one of"},
		{`{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":2},"hits":1}]}`, "items[0].spec: campaign counters count natural days with span 1"},
		{`{"items":[{"scope":{"business":7,"campaign":"1"},"subject":{"id":"k"},"spec":{"kind":"day","span":1},"hits":1}]}`, "items[0].scope: give campaign or business"},
		{`{"items":[{"scope":{"business":7},"subject":{"id":"a\u200bb"},"spec":{"kind":"day","span":1},"hits":1}]}`, "items[0].subject.id (the key) must be"},
		{`{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"sliding","span":60},"hits":2}]}`, "items[0].hits must be 0 or 1"},
		{`{"items":[]}`, "items must hold 1 to"},
		{`{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":1}]} {}`, "after top-level value"},
	} {
		code, m := call(t, "POST", base+"/v1/items", tt.body)
		if msg, _ := m["msg"].(string); code != 400 || !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %d %v, want 400 naming %q", tt.body, code, m, tt.want)
		}
	}
	// Nothing of the refused batches was written.
	_, m = call(t, "POST", base+"/v1/items", `{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"d"},"spec":{"kind":"day","span":1},"hits":0}]}`)
	expect(t, m, map[string]any{"results.0.count": 1})
}

// Deliveries of one notice racing each other (two workers, a resend while
// the first is in flight) count once on every counter.
func TestRacingDeliveriesOfOneEventCountOnce(t *testing.T) {
	srv := redistest.Start(t)
	st, _ := testStore(t, srv, newClock(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)))
	q := Query{CID: "1", Event: "win", Windows: []int{3}, PaceWindowSec: 600, EID: "race-1", Dims: []Dim{{Name: "device", ID: "d"}, {Name: "bundle", ID: "b"}}}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			q := q
			if _, err := st.Incr(context.Background(), &q); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	res := st.Read(context.Background(), []Query{q})[0]
	for j, c := range res.Counts {
		if res.Err != nil || c.Day != 1 || c.Windows[0] != 1 || c.Pace.Count != 1 {
			t.Errorf("dim %d after 20 racing deliveries: %+v (err %v), want 1 everywhere", j, c, res.Err)
		}
	}
}
