package main

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/signing"
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

// A bidder that never reserves signs rsv=0 into its notice URLs
// (client.NoticeSigner.NoReservations): its win is counted with no release
// in its run, so a reservation made for that bid anyway stays until its
// TTL, and its loss is answered without a journal entry. The same bid's
// URLs without rsv=0 end the reservation.
func TestUnreservedNoticesEndNoReservation(t *testing.T) {
	k1 := []byte("freqcap-k1-secret-0123")
	s := startStack(t, "CALLBACK_SIGNING_KEYS=k1:"+base64.StdEncoding.EncodeToString(k1))
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/un", `{"caps":[{"event":"win","window":{"unit":"day","n":1},"limit":2}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	c, err := client.New("http://"+s.counterAddr, client.Options{Timeout: time.Second, CountReserved: true})
	if err != nil {
		t.Fatal(err)
	}
	signer := client.NoticeSigner{CallbackURL: "http://" + s.public, KeyID: "k1", Secret: k1, NoReservations: true}
	urls := func(sg client.NoticeSigner, dev, req string) client.Notices {
		t.Helper()
		if _, err := c.Reserve(context.Background(), client.Identities{"device": dev}, []client.Creative{{CID: "un"}}, req+":1", time.Minute); err != nil {
			t.Fatal(err)
		}
		n, err := sg.URLs("un", client.Identities{"device": dev}, req, "1")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(n.Win, "rsv=0") != sg.NoReservations {
			t.Fatalf("win URL %s: rsv=0 is for NoReservations only", n.Win)
		}
		return n
	}
	get := func(u string) {
		t.Helper()
		if code, _, body := s.do("GET", u, ""); code != 204 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
	}
	n := urls(signer, "u1", "req-1")
	get(n.Win)
	s.waitKey("freq:{win:device:un:u1}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if held := s.zcard("rsv:{win:device:un:u1}"); held != 1 {
		t.Errorf("after a win signed rsv=0: %d reservations, want the one made anyway, left to its TTL", held)
	}
	xadds := s.redis.TotalCalls(t, "xadd")
	n = urls(signer, "u2", "req-2")
	get(n.Loss)
	if got := s.redis.TotalCalls(t, "xadd"); got != xadds {
		t.Errorf("a loss signed rsv=0 made %d journal entries, want none", got-xadds)
	}
	if held := s.zcard("rsv:{win:device:un:u2}"); held != 1 {
		t.Errorf("after a loss signed rsv=0: %d reservations, want 1", held)
	}
	// Without rsv=0 the same notices end the reservations.
	reserving := signer
	reserving.NoReservations = false
	n = urls(reserving, "u3", "req-3")
	get(n.Win)
	get(urls(reserving, "u4", "req-4").Loss)
	s.waitKey("freq:{win:device:un:u3}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if held := s.zcard("rsv:{win:device:un:u3}") + s.zcard("rsv:{win:device:un:u4}"); held != 0 {
		t.Errorf("after a win and a loss without rsv=0: %d reservations, want none", held)
	}
	// rsv takes 0 only.
	q := signing.SignQuery("k1", k1, time.Now().Add(time.Minute), "win", []signing.Param{
		{Name: "cid", Value: "un"}, {Name: "device", Value: "u5"}, {Name: "eid", Value: "req-5:1"}, {Name: "rsv", Value: "1"}})
	if code, _, body := s.do("GET", "http://"+s.public+"/win?"+q, ""); code != 400 || !strings.Contains(body, "rsv") {
		t.Errorf("rsv=1: %d %s, want 400 naming rsv", code, body)
	}
}
