package core

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

// TestReadSlots checks the slots a read's commands carry: on a Redis
// Cluster every command its key's (rueidis sends each to the node of its
// slot); elsewhere only the pipeline's first (rueidis picks one of its
// connections by it), the others none, their keys not hashed. Every read
// test, run against both, checks that the answers are right.
func TestReadSlots(t *testing.T) {
	rdb := openClient(t)
	s := NewStore(rdb, Options{ReadTimeout: time.Second}, nil)
	defer s.Close()
	var items []counting.Item
	for _, id := range []string{"d1", "0f3c9e6a-0000-4000-8000-00000000002a"} {
		for _, spec := range []counting.Spec{{Kind: counting.Day, Span: 1}, {Kind: counting.Hours, Span: 3}} {
			items = append(items, counting.Item{Scope: counting.Scope{Campaign: "42", Event: "win"},
				Subject: counting.Subject{Dim: "device", ID: id}, Spec: spec})
		}
	}
	var p readPlan
	s.plan(&p, items, s.env(), nil)
	if len(p.direct) != len(items) || len(p.cached) != 0 {
		t.Fatalf("plan: %d direct and %d cached commands, want %d direct", len(p.direct), len(p.cached), len(items))
	}
	cluster := rdb.Mode() == rueidis.ClientModeCluster
	slot := func(c rueidis.Completed) uint16 { return c.Slot() }
	none := slot(rdb.B().Arbitrary("GET").Args("k").Build())
	for i, c := range p.direct {
		key := c.Commands()[1]
		want := slot(rdb.B().Get().Key(key).Build())
		if !cluster && i > 0 {
			want = none
		}
		if c.Slot() != want {
			t.Errorf("command %d (%v): slot %#x, want %#x (cluster %v)", i, c.Commands(), c.Slot(), want, cluster)
		}
	}
}

// TestUnhashedCallIsTheSameCall checks that a function call built without
// its keys' slot (a write's runs after the first, on a Redis that is not a
// cluster) sends the same words as the one built with it, and carries no
// slot.
func TestUnhashedCallIsTheSameCall(t *testing.T) {
	rdb := openClient(t)
	keys, args := []string{"dedup:{42:d1}", "freq:{42:d1}"}, []string{"1", "1700000000000", "0", "1", "window", "86400000"}
	hashed, unhashed := countFunction.fcall(rdb, keys, args, true), countFunction.fcall(rdb, keys, args, false)
	if got, want := unhashed.Commands(), hashed.Commands(); !slices.Equal(got, want) {
		t.Errorf("unhashed %q, hashed %q", got, want)
	}
	slot := func(c rueidis.Completed) uint16 { return c.Slot() }
	if none := slot(rdb.B().Arbitrary("GET").Args("k").Build()); slot(unhashed) != none || slot(hashed) == none {
		t.Errorf("slots: unhashed %#x, hashed %#x, none %#x", slot(unhashed), slot(hashed), none)
	}
}

// openClient starts a Redis (or Cluster) and opens a client of it.
func openClient(t *testing.T) rueidis.Client {
	_, rdb := openServer(t)
	return rdb
}

// openServer is openClient with the server, to stop and resume it.
func openServer(t *testing.T) (*redistest.Server, rueidis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb, err := redisconn.Open(srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	return srv, rdb
}

// TestReadIntoSaysWhoHoldsTheBuffers checks ReadInto's contract: a read
// answered in time answers in the caller's results; one that ran out of
// time while its reader waits on Redis answers in another slice and says
// the reader holds the items and results still (it answers in them when
// Redis answers at last); the next, answered at once during the stall or
// in time after it, holds none.
func TestReadIntoSaysWhoHoldsTheBuffers(t *testing.T) {
	srv, rdb := openServer(t)
	// A read in time must be one on a loaded machine too.
	s := NewStore(rdb, Options{ReadTimeout: 250 * time.Millisecond, WriteTimeout: 5 * time.Second}, nil)
	defer s.Close()
	ctx := context.Background()
	item := counting.Item{Scope: counting.Scope{Campaign: "42", Event: "win"}, Subject: counting.Subject{Dim: "device", ID: "d1"},
		Spec: counting.Spec{Kind: counting.Hours, Span: 3}, Hits: 1}
	for range 2 {
		if r := s.Write(ctx, []counting.Item{item}); r[0].Code != 0 {
			t.Fatalf("write: %+v", r[0])
		}
	}
	item.Hits = 0
	items, into := []counting.Item{item}, make([]counting.Result, 1)
	into[0] = counting.Result{Count: 99, Stale: true, Msg: "an earlier read's"}
	res, held := s.ReadInto(ctx, items, into)
	if r := res[0]; held || &res[0] != &into[0] || r.Count != 2 || !r.Allowed || r.Stale || r.Msg != "" {
		t.Fatalf("a read in time: %+v held %v, in the caller's results %v; want count 2 there, not held", res[0], held, &res[0] == &into[0])
	}
	// With Redis stopped, the caller's wait and rueidis's own deadline end
	// at the same instant: the reader may answer first (in into, degraded,
	// not held) or the wait (elsewhere, held). Either way held says which;
	// a few tries see the second.
	fresh := func() {
		t.Helper()
		for range 500 {
			if r := s.Read(ctx, items); !r[0].Degraded {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("no fresh read after Redis came back")
	}
	sawHeld := false
	for try := 0; try < 10 && !sawHeld; try++ {
		fresh() // the stall a try began is over
		srv.Pause()
		into := make([]counting.Result, 1)
		res, held := s.ReadInto(ctx, items, into)
		srv.Resume()
		if !res[0].Degraded || held != (&res[0] != &into[0]) {
			t.Fatalf("a read past its deadline: %+v held %v, in the caller's results %v; want degraded, held when answered elsewhere", res[0], held, &res[0] == &into[0])
		}
		sawHeld = held
	}
	if !sawHeld {
		t.Fatal("in 10 reads past their deadline, the reader always answered before the wait ended")
	}
	// The next read (at once while the stall that read began lasts, or in
	// time after) holds nothing.
	if _, held := s.ReadInto(ctx, items, make([]counting.Result, 1)); held {
		t.Error("a read answered in time or during a stall says its buffers are held")
	}
}
