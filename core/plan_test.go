package core

import (
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
	t.Helper()
	srv := redistest.Start(t)
	rdb, err := redisconn.Open(srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	return rdb
}
