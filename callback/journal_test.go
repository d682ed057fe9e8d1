package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

func newTestJournal(t *testing.T, partitions, maxLen int) (*Journal, rueidis.Client) {
	t.Helper()
	return newTestJournalOn(t, redistest.Start(t), partitions, maxLen)
}

func newTestJournalOn(t testing.TB, srv *redistest.Server, partitions, maxLen int) (*Journal, rueidis.Client) {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	j := newJournal(c, partitions, maxLen, "a")
	if err := j.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Setup twice (a second instance) is fine.
	if err := j.Setup(context.Background()); err != nil {
		t.Fatal(err)
	}
	return j, c
}

func testNotice(eid string) notice {
	return notice{event: "win", cid: "42", eid: eid, dims: map[string]string{"device": "d1", "bundle": "com.x"}}
}

func TestJournalKeepsNoticesUntilAcknowledged(t *testing.T) {
	ctx := context.Background()
	j, c := newTestJournal(t, 2, 4)
	for i, eid := range []string{"e1", "e2", "e3", "e4"} {
		if err := j.Append(ctx, testNotice(eid)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	// Two per partition: both are full, and a refused append writes nothing.
	if err := j.Append(ctx, testNotice("e5")); !errors.Is(err, errJournalFull) {
		t.Fatalf("append to a full partition: %v, want errJournalFull", err)
	}
	st, err := j.Stats(ctx)
	if err != nil || st.undelivered != 4 || st.pending != 0 {
		t.Fatalf("stats %+v (%v), want 4 undelivered, 0 pending", st, err)
	}

	var got []entry
	for p := range j.keys {
		es, err := j.Read(ctx, p, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, es...)
	}
	if len(got) != 4 {
		t.Fatalf("read %d entries, want 4", len(got))
	}
	for _, e := range got {
		if e.bad != nil || e.n.event != "win" || e.n.cid != "42" || e.n.dims["device"] != "d1" || e.n.dims["bundle"] != "com.x" || len(e.n.dims) != 2 {
			t.Errorf("entry %s decoded as %+v (%v)", e.id, e.n, e.bad)
		}
		if time.Since(e.n.accepted) > time.Minute || time.Since(e.n.accepted) < 0 {
			t.Errorf("entry %s accepted at %s", e.id, e.n.accepted)
		}
	}
	if st, _ := j.Stats(ctx); st.pending != 4 {
		t.Errorf("after reading: %d pending, want 4", st.pending)
	}

	// A read entry left unacknowledged is claimed by another consumer once idle.
	other := newJournal(c, 2, 4, "b")
	if es, _, err := other.Claim(ctx, got[0].part, time.Hour, "0-0", 10); err != nil || len(es) != 0 {
		t.Fatalf("claimed %d entries that were not idle for long (%v)", len(es), err)
	}
	var claimed []entry
	for p := range j.keys {
		es, next, err := other.Claim(ctx, p, 0, "0-0", 10)
		if err != nil || next != "0-0" {
			t.Fatalf("claim: %v (cursor %s)", err, next)
		}
		claimed = append(claimed, es...)
	}
	if len(claimed) != 4 {
		t.Fatalf("claimed %d entries, want 4", len(claimed))
	}

	// Acknowledged entries are trimmed: the partition takes new ones. An
	// entry still pending, and one never read, stay.
	// Entries come in partition order: the last one, still pending, is in
	// the other partition than the first.
	last := claimed[len(claimed)-1]
	for _, e := range claimed[:len(claimed)-1] {
		if err := other.Ack(ctx, []entry{e}); err != nil {
			t.Fatal(err)
		}
	}
	unread := testNotice("e6")
	p0 := claimed[0].part
	j.next.Store(uint64(p0 + len(j.keys) - 1)) // the next append goes to p0
	if err := j.Append(ctx, unread); !errors.Is(err, errJournalFull) {
		t.Fatalf("append to a partition full of acknowledged entries before a trim: %v", err)
	}
	if err := j.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := j.Stats(ctx); st.undelivered != 1 || st.pending != 1 {
		t.Fatalf("after acknowledging all but one: %+v, want the pending one kept", st)
	}
	j.next.Store(uint64(p0 + len(j.keys) - 1))
	if err := j.Append(ctx, unread); err != nil {
		t.Fatal(err)
	}
	if err := j.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := j.Stats(ctx); st.undelivered != 2 {
		t.Fatalf("an unread entry was trimmed: %+v", st)
	}
	es, err := j.Read(ctx, p0, 10, 0)
	if err != nil || len(es) != 1 || es[0].n.eid != "e6" {
		t.Fatalf("unread entry after a trim: %+v (%v)", es, err)
	}
	if err := other.Ack(ctx, []entry{last}); err != nil {
		t.Fatal(err)
	}
	if err := j.Ack(ctx, es[:1]); err != nil {
		t.Fatal(err)
	}
	if err := j.Trim(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := j.Stats(ctx); st.undelivered != 0 || st.pending != 0 || st.lag != 0 {
		t.Errorf("after acknowledging: %+v, want an empty journal", st)
	}
	if err := j.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, testNotice("e5")); err != nil {
		t.Errorf("append after acknowledging: %v", err)
	}

	// Consumers without pending entries are forgotten once idle.
	if n, err := j.Forget(ctx, 0); err != nil || n != 2 {
		t.Errorf("forgot %d consumers (%v), want b on both partitions", n, err)
	}
}

func TestJournalRecreatesAFlushedStream(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	j, _ := newTestJournalOn(t, srv, 1, 10)
	srv.OnMasters(t, "FLUSHALL")
	if _, err := j.Read(ctx, 0, 10, 0); err == nil {
		t.Fatal("read of a flushed journal: no error")
	}
	if err := j.Append(ctx, testNotice("e1")); err != nil {
		t.Fatal(err)
	}
	es, err := j.Read(ctx, 0, 10, 0)
	if err != nil || len(es) != 1 {
		t.Fatalf("after the group came back: %d entries (%v), want 1", len(es), err)
	}
}

func TestJournalRefusesEntriesThatAreNotNotices(t *testing.T) {
	ctx := context.Background()
	j, c := newTestJournal(t, 1, 10)
	if err := c.Do(ctx, c.B().Xadd().Key(journalKey(0)).Id("*").FieldValue().FieldValue("junk", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	es, err := j.Read(ctx, 0, 10, 0)
	if err != nil || len(es) != 1 || es[0].bad == nil {
		t.Fatalf("a junk entry: %+v (%v), want it marked bad", es, err)
	}
}

// TestJournalEntriesHoldAnyValue: in either format (CALLBACK_JOURNAL_FORMAT)
// a notice reads back as it was, whatever bytes its values hold (a
// separator, a digit, a newline, in a dimension the counter has not yet
// checked); format 1 writes a field per value, as every version reads
// them, format 2 one field, each value with its length; a journal reads
// both whichever it writes, and its dead letters too.
func TestJournalEntriesHoldAnyValue(t *testing.T) {
	ctx := context.Background()
	odd := notice{event: "win", cid: "c-1", eid: "3:E:1", crid: "cr.2", unreserved: true,
		dims: map[string]string{"device": "12:ab\n:\x05C1:x" + strings.Repeat("\xff", 300), "bundle": ":", "tagid": "\x00"}}
	for _, packed := range []bool{false, true} {
		j, c := newTestJournal(t, 1, 10)
		j.packed = packed
		if err := j.Append(ctx, odd); err != nil {
			t.Fatal(err)
		}
		raw, err := c.Do(ctx, c.B().Xrange().Key(journalKey(0)).Start("-").End("+").Build()).AsXRange()
		if err != nil || len(raw) != 1 {
			t.Fatalf("the entry in Redis: %+v (%v)", raw, err)
		}
		fv := raw[0].FieldValues
		if packed && (len(fv) != 1 || fv[packedField] == "") {
			t.Errorf("format 2 wrote %v, want one field %s", fv, packedField)
		}
		if !packed && (fv["E"] != "win" || fv["device"] != odd.dims["device"] || fv[packedField] != "") {
			t.Errorf("format 1 wrote %v, want a field per value", fv)
		}
		reader := newJournal(c, 1, 10, "other")
		reader.packed = !packed
		es, err := reader.Read(ctx, 0, 10, 0)
		if err != nil || len(es) != 1 || es[0].bad != nil {
			t.Fatalf("read: %+v (%v)", es, err)
		}
		got := es[0].n
		got.accepted = time.Time{}
		if fmt.Sprint(got) != fmt.Sprint(odd) {
			t.Errorf("packed=%v: read back %+v, want %+v", packed, got, odd)
		}
		// A dead letter is written in the journal's format and listed.
		if err := j.Bury(ctx, es, []string{"why"}); err != nil {
			t.Fatal(err)
		}
		dead, n, err := reader.DeadLetters(ctx, "", 10)
		if err != nil || n != 1 || len(dead) != 1 || dead[0].EID != odd.eid || dead[0].Dims["device"] != odd.dims["device"] ||
			dead[0].Error != "why" || dead[0].CRID != odd.crid {
			t.Errorf("packed=%v: dead letters %+v (%d, %v)", packed, dead, n, err)
		}
	}
}

// TestJournalReadsEntriesOfAFieldPerValue: entries written with a field
// per value (before packedField) are read as they were, and an entry
// whose packed field is cut short is marked bad, not half read.
func TestJournalReadsEntriesOfAFieldPerValue(t *testing.T) {
	ctx := context.Background()
	j, c := newTestJournal(t, 1, 10)
	old := c.B().Xadd().Key(journalKey(0)).Id("*").FieldValue().FieldValue("E", "win").FieldValue("C", "42").
		FieldValue("I", "e1").FieldValue("R", "cr").FieldValue("U", "1").FieldValue("device", "d1").FieldValue("tagid", "t1").Build()
	whole := packNotice(testNotice("e2"))
	cut := c.B().Xadd().Key(journalKey(0)).Id("*").FieldValue().FieldValue(packedField, whole[:len(whole)-1]).Build()
	for _, cmd := range []rueidis.Completed{old, cut} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	es, err := j.Read(ctx, 0, 10, 0)
	if err != nil || len(es) != 2 {
		t.Fatalf("read %d entries (%v), want 2", len(es), err)
	}
	n := es[0].n
	if es[0].bad != nil || n.event != "win" || n.cid != "42" || n.eid != "e1" || n.crid != "cr" || !n.unreserved ||
		len(n.dims) != 2 || n.dims["device"] != "d1" || n.dims["tagid"] != "t1" {
		t.Errorf("an entry of a field per value read as %+v (%v)", n, es[0].bad)
	}
	if es[1].bad == nil {
		t.Errorf("an entry cut short read as %+v, want it marked bad", es[1].n)
	}
}

// replicaFor is a replica of the master serving key: one of the cluster's,
// or one started for a single server.
func replicaFor(t *testing.T, srv *redistest.Server, key string) *redistest.Server {
	t.Helper()
	if !redistest.Clustered() {
		return srv.StartReplica(t)
	}
	return srv.ReplicaOf(t, srv.MasterOf(t, key))
}

// replicaLen is XLEN of key on the replica itself (READONLY on a cluster).
func replicaLen(t *testing.T, replica *redistest.Server, key string) int64 {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{replica.Addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int64
	err = c.Dedicated(func(d rueidis.DedicatedClient) error {
		if redistest.Clustered() {
			if err := d.Do(context.Background(), d.B().Readonly().Build()).Error(); err != nil {
				return err
			}
		}
		n, err = d.Do(context.Background(), d.B().Xlen().Key(key).Build()).AsInt64()
		return err
	})
	if err != nil {
		t.Fatalf("XLEN %s on replica %s: %v", key, replica.Addr, err)
	}
	return n
}

// TestReplicatedAppendsWaitForAReplica: with Replicate, an append is
// acknowledged only once a replica has it; with the replica frozen it is
// errNotReplicated (the notice gets 503), while an append that does not
// wait still succeeds.
func TestReplicatedAppendsWaitForAReplica(t *testing.T) {
	srv := redistest.Start(t)
	key := journalKey(0)
	replica := replicaFor(t, srv, key)
	j, c := newTestJournalOn(t, srv, 1, 10_000)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	j.Replicate(ctx, 1, 300*time.Millisecond)
	if n, err := redisconn.MinReplicas(ctx, c); err != nil || n < 1 {
		t.Fatalf("MinReplicas = %d (%v), want at least 1", n, err)
	}

	// 300 concurrent appends: each one acknowledged is on the replica at
	// once, and they shared WAITs (a group commit).
	srv.OnMasters(t, "CONFIG", "RESETSTAT")
	errs := make(chan error, 300)
	for i := range 300 {
		go func() { errs <- j.Append(ctx, testNotice(fmt.Sprintf("e%d", i))) }()
	}
	for range 300 {
		if err := <-errs; err != nil {
			t.Fatalf("replicated append: %v", err)
		}
	}
	if n := replicaLen(t, replica, key); n != 300 {
		t.Fatalf("replica holds %d entries once 300 appends were acknowledged, want 300", n)
	}
	if waits, adds := srv.TotalCalls(t, "wait"), srv.TotalCalls(t, "xadd"); adds != 300 || waits < 1 || waits > adds {
		t.Errorf("%d XADD and %d WAIT, want 300 XADD and 1..300 WAIT", adds, waits)
	}

	// The replica frozen: the append reaches the master, not the replica.
	replica.Pause()
	err := j.Append(ctx, testNotice("frozen"))
	if !errors.Is(err, redisconn.ErrNotReplicated) {
		replica.Resume()
		t.Fatalf("append with the replica frozen: %v, want errNotReplicated", err)
	}
	plain := newJournal(c, 1, 10_000, "plain")
	if err := plain.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := plain.Append(ctx, testNotice("unwaited")); err != nil {
		t.Errorf("an append that does not wait, with the replica frozen: %v", err)
	}
	replica.Resume()

	// Once the replica is back, appends are acknowledged again.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := j.Append(ctx, testNotice("back"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("appends after the replica came back: %v", err)
		}
	}
	if n := replicaLen(t, replica, key); n < 303 {
		t.Errorf("replica holds %d entries, want the 300, the frozen and unwaited ones, and the last", n)
	}
}

// A signed notice is taken once while its URL is valid: sent again, even
// after Redis lost its scripts, it is errDuplicate and nothing is
// appended; its record goes after its URL's expiry minute. A notice of
// another event with the same event id is another notice.
func TestJournalTakesASignedNoticeOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	j, c := newTestJournalOn(t, srv, 4, 10_000)
	n := testNotice("req-1:1")
	n.exp = time.Now().Add(10 * time.Minute)
	if err := j.Append(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(ctx, n); !errors.Is(err, errDuplicate) {
		t.Fatalf("the same signed notice again: %v, want errDuplicate", err)
	}
	srv.OnMasters(t, "SCRIPT", "FLUSH")
	if err := j.Append(ctx, n); !errors.Is(err, errDuplicate) {
		t.Fatalf("the same signed notice after SCRIPT FLUSH: %v, want errDuplicate", err)
	}
	imp := n
	imp.event = "imp"
	if err := j.Append(ctx, imp); err != nil {
		t.Fatalf("the same event id for another event: %v", err)
	}
	var total int64
	for p := range j.keys {
		total += xlen(t, c, j.keys[p])
	}
	if total != 2 {
		t.Errorf("the journal holds %d entries, want 2", total)
	}
	keys := srv.Keys(t, "seen:*")
	if len(keys) == 0 {
		t.Fatal("no seen:* record")
	}
	for _, k := range keys {
		ttl, err := c.Do(ctx, c.B().Ttl().Key(k).Build()).AsInt64()
		if err != nil || ttl <= 0 || ttl > int64(time.Until(n.exp)/time.Second)+3*60 {
			t.Errorf("%s: TTL %d (%v), want it to go within three minutes of the URL's exp (its minute, and a minute of grace)", k, ttl, err)
		}
	}

	// Replicated appends (EVAL in a group commit) decide alike.
	key := journalKey(0)
	replicaFor(t, srv, key)
	rj, _ := newTestJournalOn(t, srv, 1, 10_000)
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	rj.Replicate(rctx, 1, time.Second)
	r := testNotice("req-2:1")
	r.exp = time.Now().Add(time.Minute)
	if err := rj.Append(ctx, r); err != nil {
		t.Fatalf("replicated signed append: %v", err)
	}
	if err := rj.Append(ctx, r); !errors.Is(err, errDuplicate) {
		t.Fatalf("replicated signed append again: %v, want errDuplicate", err)
	}
}

func xlen(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(context.Background(), c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}
