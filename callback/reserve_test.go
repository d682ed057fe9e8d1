package main

import (
	"context"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// zcard is how many members a ZSet holds (0 when absent).
func (s *stack) zcard(key string) int64 {
	s.t.Helper()
	n, err := s.rc.Do(context.Background(), s.rc.B().Zcard().Key(key).Build()).AsInt64()
	if err != nil {
		s.t.Fatalf("ZCARD %s: %v", key, err)
	}
	return n
}

// reservedDecide decides for dev counting in-flight bids.
func (s *stack) reservedDecide(dev string, cands ...counting.Candidate) counting.Verdict {
	s.t.Helper()
	return s.decideWith(counting.DecideRequest{Identities: map[string]string{"device": dev}, Candidates: cands, Reserved: true})[0]
}

// An in-flight bid counts in decide (with reserved) at every level its
// caps read; its win notice turns it into the count exactly once (also
// sent twice, and through a callback SIGKILL), its loss notice releases
// it, and so does its TTL.
func TestReservationsHoldInFlightBids(t *testing.T) {
	env := []string{"CALLBACK_CLAIM_IDLE=1s"}
	s := startStack(t, env...)
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/rv", `{"advertiser":"ra","caps":[
		{"event":"win","window":{"unit":"day","n":1},"limit":1},
		{"level":"advertiser","event":"imp","window":{"unit":"day","n":1},"limit":1}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	c, err := client.New("http://"+s.counterAddr, client.Options{Timeout: time.Second, CountReserved: true})
	if err != nil {
		t.Fatal(err)
	}
	rv := counting.Candidate{CID: "rv"}
	reserve := func(dev, bid string, ttl time.Duration) {
		t.Helper()
		got, err := c.Reserve(context.Background(), client.Identities{"device": dev}, []client.Creative{rv}, bid, ttl)
		if err != nil || len(got) != 1 || got[0].Counters != 2 || got[0].Code != 0 {
			t.Fatalf("Reserve %s: %+v %v, want the bid held on the campaign's and the advertiser's counters", bid, got, err)
		}
	}
	// Held: the campaign's win cap and the advertiser's imp cap both count it.
	reserve("d", "req-1:1", 0)
	if v := s.reservedDecide("d", rv); v.Allowed || v.Reserved != 1 || v.Count != 1 {
		t.Errorf("with a bid in flight: %+v, want blocked on 1 reserved", v)
	}
	if v := s.decide("d", rv)[0]; !v.Allowed {
		t.Errorf("without reserved: %+v, want allowed (nothing counted yet)", v)
	}
	// Its win, sent twice: one count, the reservation gone, never both.
	s.notice("/win?cid=rv&device=d&eid=req-1:1")
	s.notice("/win?cid=rv&device=d&eid=req-1:1")
	s.waitKey("freq:{win:device:rv:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if n := s.zcard("rsv:{win:device:rv:d}") + s.zcard("rsv:{win:device:advertiser=ra:d}"); n != 0 {
		t.Errorf("%d reservations left after the win", n)
	}
	if v := s.reservedDecide("d", rv); v.Allowed || v.Reserved != 0 || v.Count != 1 {
		t.Errorf("after the win: %+v, want blocked on the count of 1, nothing reserved", v)
	}
	// A loss releases it.
	reserve("d2", "req-2:1", 0)
	s.notice("/loss?cid=rv&device=d2&eid=req-2:1")
	s.waitSettled(10 * time.Second)
	if v := s.reservedDecide("d2", rv); !v.Allowed || s.exists("freq:{win:device:rv:d2}") {
		t.Errorf("after the loss: %+v, want allowed and nothing counted", v)
	}
	// So does its TTL.
	reserve("d3", "req-3:1", 300*time.Millisecond)
	if v := s.reservedDecide("d3", rv); v.Allowed {
		t.Errorf("a fresh reservation: %+v, want blocked", v)
	}
	for deadline := time.Now().Add(5 * time.Second); !s.reservedDecide("d3", rv).Allowed; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a reservation of 300 ms still held after 5 s")
		}
	}
	// A win delivered after callback was killed with the counter down.
	reserve("d4", "req-4:1", time.Minute)
	s.counter.Kill()
	s.notice("/win?cid=rv&device=d4&eid=req-4:1")
	s.callback.Kill()
	s.callback = s.startCallback(env...)
	s.startCounter()
	s.waitKey("freq:{win:device:rv:d4}", 1, 30*time.Second)
	s.waitSettled(10 * time.Second)
	if v := s.reservedDecide("d4", rv); v.Reserved != 0 || v.Count != 1 || s.zcard("rsv:{win:device:rv:d4}") != 0 {
		t.Errorf("after a win through a SIGKILL: %+v, want the count of 1 and nothing reserved", v)
	}
}
