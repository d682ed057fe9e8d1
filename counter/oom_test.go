package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

// A Redis at its maxmemory (noeviction, as compose runs it) refuses every
// kind of write whole: memory stays at the bound, every item answers
// 10004, and once Redis has room the same writes count exactly once. The
// event-id kinds used to prune their dedupe set first (a command Redis
// allows when full), after which Redis no longer checked memory for the
// rest of the script and kept counting past the bound.
func TestAFullRedisRefusesEveryKindOfWrite(t *testing.T) {
	const maxmemory = 4 << 20
	srv := redistest.StartWith(t, "--maxmemory", strconv.Itoa(maxmemory), "--maxmemory-policy", "noeviction")
	st, _ := testStore(t, srv, newClock(time.Now()))
	ctx := context.Background()

	// Fill Redis with distinct counters of every kind until it refuses.
	var refused []counting.Item
	for round := 0; refused == nil; round++ {
		if round > 2000 {
			t.Fatalf("Redis never filled up: used_memory %d", srv.UsedMemory(t))
		}
		its := everyKindAt(round, 20)
		res := st.Write(ctx, its)
		for i, r := range res {
			if r.Code == 0 {
				continue
			}
			if r.Code != apierr.Unavailable {
				t.Fatalf("item %d (%s): code %d %s, want 0 or %d", i, its[i].Spec.Kind, r.Code, r.Msg, apierr.Unavailable)
			}
			refused = its
		}
	}
	if used := srv.UsedMemory(t); used > maxmemory+256<<10 {
		t.Errorf("used_memory %d past maxmemory %d", used, maxmemory)
	}
	// Right at the bound a write may pass as memory moves; well past it
	// (a bound under what every master holds), every kind is refused,
	// again and again, and nothing grows.
	srv.OnMasters(t, "CONFIG", "SET", "maxmemory", "1mb")
	full, keys := srv.UsedMemory(t), map[string]bool{}
	for _, k := range srv.Keys(t, "*") {
		keys[k] = true
	}
	for round := 0; round < 20; round++ {
		its := everyKindAt(100_000+round, 20)
		for i, r := range st.Write(ctx, its) {
			if r.Code != apierr.Unavailable {
				t.Fatalf("full Redis, round %d, item %d (%s): code %d %s, want %d", round, i, its[i].Spec.Kind, r.Code, r.Msg, apierr.Unavailable)
			}
		}
	}
	// Nothing was written; what moves is the clients' buffers.
	if used := srv.UsedMemory(t); used > full+512<<10 {
		t.Errorf("used_memory grew from %d to %d in a full Redis", full, used)
	}
	// No key appeared (the limiters' short-lived keys may expire meanwhile:
	// a count of keys would move without a write).
	for _, k := range srv.Keys(t, "*") {
		if !keys[k] {
			t.Errorf("key %s appeared in a full Redis", k)
		}
	}
	// With room again, the writes with event ids that were refused count
	// once: a retry counts them, a second retry finds them counted.
	srv.OnMasters(t, "CONFIG", "SET", "maxmemory", "0")
	var ided []counting.Item
	for _, it := range refused {
		if it.EventID != "" {
			ided = append(ided, it)
		}
	}
	first := st.Write(ctx, ided)
	again := st.Write(ctx, ided)
	for i, it := range ided {
		if first[i].Code != 0 || again[i].Code != 0 {
			t.Fatalf("item %d (%s): codes %d %s / %d %s", i, it.Spec.Kind, first[i].Code, first[i].Msg, again[i].Code, again[i].Msg)
		}
		if !again[i].Duplicate || again[i].Count != first[i].Count {
			t.Errorf("item %d (%s): counted again: %+v then %+v", i, it.Spec.Kind, first[i], again[i])
		}
	}
}

// everyKindAt is everyKind on subjects of its own round.
func everyKindAt(round, n int) []counting.Item {
	its := everyKind(n)
	for i := range its {
		its[i].Subject.ID = fmt.Sprintf("r%d-%s", round, its[i].Subject.ID)
		if its[i].EventID != "" {
			its[i].EventID = fmt.Sprintf("r%d-%s", round, its[i].EventID)
		}
	}
	return its
}
