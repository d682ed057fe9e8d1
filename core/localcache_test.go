package core

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

// TestLocalCacheHoldsWhatRueidisCaches checks the contract the in-process
// read relies on: what rueidis caches is found under the name cacheKey
// gives it, an invalidation from Redis removes it, and a connection that
// breaks flushes the table.
func TestLocalCacheHoldsWhatRueidisCaches(t *testing.T) {
	srv, lc, rdb, other := cachingClient(t)
	ctx := context.Background()
	b := rdb.B()
	// rueidis recycles what it sent: every use builds them anew.
	cmds := func() []rueidis.CacheableTTL {
		return []rueidis.CacheableTTL{
			rueidis.CT(b.Get().Key("lc:{a}").Cache(), time.Minute),
			rueidis.CT(b.Hgetall().Key("lc:{b}").Cache(), time.Minute),
			rueidis.CT(b.Hmget().Key("lc:{b}").Field("1", "2").Cache(), time.Minute),
		}
	}
	if _, ok := lc.lookup(names(cmds()), time.Now()); ok {
		t.Fatal("an empty table answered")
	}
	for _, c := range []rueidis.Completed{
		other.B().Set().Key("lc:{a}").Value("5").Build(),
		other.B().Hset().Key("lc:{b}").FieldValue().FieldValue("1", "7").Build(),
	} {
		if err := other.Do(ctx, c).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rdb.DoMultiCache(ctx, cmds()...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
	}
	rs, ok := lc.lookup(names(cmds()), time.Now())
	if !ok {
		t.Fatalf("after rueidis cached them, the table holds %d answers but not these", lc.size())
	}
	if v, _ := rs[0].ToString(); v != "5" {
		t.Errorf("GET answered %q from the table, want 5", v)
	}
	if m, _ := rs[1].AsIntMap(); m["1"] != 7 {
		t.Errorf("HGETALL answered %v from the table, want 1=7", m)
	}
	if _, ok := lc.lookup(names(cmds()), time.Now().Add(2*time.Minute)); ok {
		t.Error("an answer past its client-side TTL was found")
	}

	if err := other.Do(ctx, other.B().Incr().Key("lc:{a}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { _, ok := lc.lookup(names(cmds())[:1], time.Now()); return !ok })
	if _, ok := lc.lookup(names(cmds())[1:], time.Now()); !ok {
		t.Error("an invalidation of one key removed another's answers")
	}

	// A broken connection may have missed invalidations: nothing it
	// cached may be answered, and the flush is counted. (A Cluster's
	// client closes connections of its own as it learns the topology:
	// those flushes come before.)
	flushes := lc.Flushes()
	srv.OnMasters(t, "CLIENT", "KILL", "TYPE", "normal")
	waitUntil(t, func() bool { return lc.size() == 0 })
	waitUntil(t, func() bool { return lc.Flushes() > flushes })
}

// TestLocalNamesAreRueidisNames checks that the names the kinds give their
// cached reads are the names rueidis files their answers under.
func TestLocalNamesAreRueidisNames(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisconn.Open(srv.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	e := &env{b: rdb.B(), now: time.Now(), loc: time.UTC, cluster: rdb.Mode() == rueidis.ClientModeCluster}
	items := []counting.Item{
		{Scope: counting.Scope{Campaign: "42", Event: "win"}, Subject: counting.Subject{Dim: "bundle", ID: "com.x"}, Spec: counting.Spec{Kind: counting.Day, Span: 1}},
		{Scope: counting.Scope{Campaign: "42", Event: "win", Level: "advertiser"}, Subject: counting.Subject{Dim: "device", ID: "d:1{%}"}, Spec: counting.Spec{Kind: counting.Hours, Span: 3}},
	}
	named := 0
	for k, kd := range kinds {
		ln, ok := kd.(localNamed)
		if !ok {
			continue
		}
		for _, it := range items {
			if it.Spec.Kind != k {
				continue
			}
			named++
			b, one := appendLocalName(nil, &it)
			if lb, lone := ln.appendLocalName(nil, &it); string(lb) != string(b) || lone != one {
				t.Errorf("%s: appendLocalName %q, the kind's own %q", k, b, lb)
			}
			name := string(b)
			cmds, cacheable := kd.read(&it, e)
			if !one || !cacheable || len(cmds) != 1 {
				t.Fatalf("%s: localName says one cached command (%v), read gives %d (cacheable %v)", k, one, len(cmds), cacheable)
			}
			if want := cacheKey(cmds[0]); name != want {
				t.Errorf("%s: local name %q, rueidis files it under %q", k, name, want)
			}
		}
	}
	if named != len(items) {
		t.Errorf("checked %d kinds, want %d", named, len(items))
	}
	// lookupItems asks the kinds through appendLocalName's switch.
	for k, kd := range kinds {
		if _, ok := kd.(localNamed); !ok {
			continue
		}
		switch kd.(type) {
		case windowKind, hoursKind:
		default:
			t.Errorf("kind %s names its cached reads, but appendLocalName does not ask it", k)
		}
	}
	secs := counting.Item{Scope: counting.Scope{Business: 7}, Subject: counting.Subject{ID: "k"}, Spec: counting.Spec{Kind: counting.Seconds, Span: 60}}
	if _, one := kinds[counting.Seconds].(localNamed).appendLocalName(nil, &secs); one {
		t.Error("a seconds window (GET and PTTL) has a local name")
	}
}

// lookup answers every name from the table, as lookupItems does by items.
func (c *LocalCache) lookup(names []string, now time.Time) ([]rueidis.RedisResult, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var res []rueidis.RedisResult
	for _, name := range names {
		v, ok := c.m[name]
		if !ok || v.msg.CachePXAT() <= now.UnixMilli() {
			return nil, false
		}
		res = append(res, rueidis.NewResult(v.msg, nil))
	}
	return res, true
}

func names(cmds []rueidis.CacheableTTL) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = cacheKey(c.Cmd)
	}
	return out
}

// cacheKey is the name rueidis's adapter gives a command's answer: the
// key, then the command without it (a cacheable command's key is its
// second word).
func cacheKey(cmd rueidis.Cacheable) string {
	cs := cmd.Commands()
	if len(cs) == 2 {
		return cs[1] + cs[0]
	}
	var b strings.Builder
	b.WriteString(cs[1])
	b.WriteString(cs[0])
	for _, s := range cs[2:] {
		b.WriteString(s)
	}
	return b.String()
}

func TestLocalCacheIsBounded(t *testing.T) {
	lc := NewLocalCache(64 << 10)
	s := simpleCache{c: lc, conn: new(conn)}
	for i := range 10_000 {
		s.Set(fmt.Sprintf("key:%d", i), rueidis.RedisMessage{})
	}
	if lc.bytes > lc.maxBytes {
		t.Errorf("table holds %d bytes, bound %d", lc.bytes, lc.maxBytes)
	}
	sum := 0
	for k, v := range lc.m {
		sum += entryBytes(k, v)
	}
	if sum != lc.bytes || lc.size() < 100 {
		t.Errorf("table counts %d bytes for %d entries that take %d", lc.bytes, lc.size(), sum)
	}
	s.Flush()
	if lc.size() != 0 || lc.bytes != 0 {
		t.Errorf("after Flush: %d entries, %d bytes", lc.size(), lc.bytes)
	}
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHashesAnswersFromTheLocalCache checks that a hash the process's
// client-side cache holds is answered from it, decoded once (every read
// shares one map until Redis invalidates it), that an edit made elsewhere
// reaches the next read, and that an absent hash reads as an empty map
// either way.
func TestHashesAnswersFromTheLocalCache(t *testing.T) {
	_, lc, rdb, other := cachingClient(t)
	ctx := context.Background()
	hset := func(v string) {
		t.Helper()
		if err := other.Do(ctx, other.B().Hset().Key("campaign:h1").FieldValue().FieldValue("caps", v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	hset("a")
	s := NewStore(rdb, Options{Cache: lc}, nil)
	keys := []string{"campaign:h1", "campaign:absent"}
	read := func() []map[string]string {
		t.Helper()
		hs, ages, err := s.Hashes(ctx, keys)
		if err != nil || ages != nil {
			t.Fatalf("Hashes: %v (ages %v)", err, ages)
		}
		return hs
	}
	first := read()
	if first[0]["caps"] != "a" || first[1] == nil || len(first[1]) != 0 {
		t.Fatalf("first read %v, want caps=a and an empty map", first)
	}
	// The answers are in the table now: the next reads share its maps.
	waitUntil(t, func() bool { hs := read(); return SameHash(hs[0], read()[0]) })
	hs := read()
	if hs[0]["caps"] != "a" || hs[1] == nil || len(hs[1]) != 0 {
		t.Fatalf("cached read %v, want caps=a and an empty map", hs)
	}
	if lc.lookupHashes(keys, time.Now(), make([]map[string]string, 2)) != 2 {
		t.Error("the table does not hold both hashes")
	}
	if SameHash(hs[0], hs[1]) {
		t.Error("two hashes answered one map")
	}
	// Past the client-side TTL, nothing is answered from the table.
	if n := lc.lookupHashes(keys, time.Now().Add(Defaults.CacheTTL+time.Second), make([]map[string]string, 2)); n != 0 {
		t.Errorf("%d hashes answered past their client-side TTL", n)
	}

	hset("b")
	waitUntil(t, func() bool { return read()[0]["caps"] == "b" })
	if read()[0]["caps"] != "b" {
		t.Error("an edit was answered and then lost")
	}
}

// cachingClient starts a Redis and opens a client caching in a new local
// table, and another that caches nothing (to change what the first has
// cached).
func cachingClient(t *testing.T) (*redistest.Server, *LocalCache, rueidis.Client, rueidis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	lc := NewLocalCache(0)
	rdb, err := redisconn.Open(srv.URL(), lc.Install)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	other, err := redisconn.Open(srv.URL(), func(o *rueidis.ClientOption) { o.DisableCache = true })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	return srv, lc, rdb, other
}

// TestAReadTakesWhatTheTableHolds checks that a read whose counts are
// partly in the process's table (a bundle's, beside a new device's) takes
// those from the table and sends Redis only the rest, and that every count
// it answers is right.
func TestAReadTakesWhatTheTableHolds(t *testing.T) {
	_, lc, rdb, _ := cachingClient(t)
	s := NewStore(rdb, Options{Cache: lc, WriteTimeout: 5 * time.Second, ReadTimeout: time.Second}, nil)
	defer s.Close()
	ctx := context.Background()
	item := func(dim, id string, kind counting.Kind, span int64) counting.Item {
		return counting.Item{Scope: counting.Scope{Campaign: "42", Event: "win"}, Subject: counting.Subject{Dim: dim, ID: id},
			Spec: counting.Spec{Kind: kind, Span: span}, Hits: 1}
	}
	bundleDay, bundleHours := item("bundle", "com.x", counting.Day, 1), item("bundle", "com.x", counting.Hours, 3)
	deviceDay := item("device", "d1", counting.Day, 1)
	for _, w := range [][]counting.Item{{bundleDay, bundleHours}, {bundleDay, bundleHours}, {deviceDay}} {
		for _, r := range s.Write(ctx, w) {
			if r.Degraded || r.Code != 0 {
				t.Fatalf("write: %+v", r)
			}
		}
	}
	bundle := []counting.Item{bundleDay, bundleHours}
	for i := range bundle {
		bundle[i].Hits = 0
	}
	// The bundle's counts go through client-side caching and stay in the
	// table.
	s.Read(ctx, bundle)
	waitUntil(t, func() bool {
		_, _, day := lc.lookupItem(&bundle[0], time.Now().UnixMilli())
		_, _, hours := lc.lookupItem(&bundle[1], time.Now().UnixMilli())
		return day && hours
	})
	items := []counting.Item{deviceDay, bundle[0], bundle[1]}
	items[0].Hits = 0
	var p readPlan
	s.plan(&p, items, s.env(), nil)
	if len(p.cached) != 0 || len(p.local) != 2 || p.at[1].src != fromLocal || p.at[2].src != fromLocal || p.at[0].src != fromDirect {
		t.Fatalf("plan: %d cached commands, %d local answers, spans %+v; want the bundle's two from the table, the device's from Redis", len(p.cached), len(p.local), p.at)
	}
	for i, r := range s.Read(ctx, items) {
		if want := []int64{1, 2, 2}[i]; r.Count != want || r.Degraded || r.Stale {
			t.Errorf("item %d (%s %s): %+v, want count %d", i, items[i].Subject.Dim, items[i].Spec.Kind, r, want)
		}
	}
}

// TestAConnectionTakesOnlyItsOwnAnswersWhenItCloses: a connection's close
// takes out of the table the answers it put there (they may have missed
// invalidations since), those it put there last; another connection's
// answers stay, and a connection that never filled the table (a Cluster
// client's connection to learn the topology) takes nothing.
func TestAConnectionTakesOnlyItsOwnAnswersWhenItCloses(t *testing.T) {
	lc := NewLocalCache(0)
	a, b, idle := simpleCache{c: lc, conn: new(conn)}, simpleCache{c: lc, conn: new(conn)}, simpleCache{c: lc, conn: new(conn)}
	a.Set("a", rueidis.RedisMessage{})
	a.Set("both", rueidis.RedisMessage{})
	b.Set("b", rueidis.RedisMessage{})
	b.Set("both", rueidis.RedisMessage{}) // b's answer now
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := lc.m[k]; !ok {
				return false
			}
		}
		return lc.size() == len(keys)
	}
	idle.Flush()
	if !has("a", "b", "both") || lc.Flushes() != 0 {
		t.Fatalf("a connection that filled nothing closed: %d answers left, %d flushes; want 3, 0", lc.size(), lc.Flushes())
	}
	a.Flush()
	if !has("b", "both") || lc.Flushes() != 1 {
		t.Fatalf("a connection closed: %v left, %d flushes; want b's answers b and both, 1", lc.m, lc.Flushes())
	}
	b.Flush()
	if lc.size() != 0 || lc.bytes != 0 || lc.Flushes() != 2 {
		t.Fatalf("the other closed: %d answers and %d bytes left, %d flushes; want none, 2", lc.size(), lc.bytes, lc.Flushes())
	}
}

// TestABrokenConnectionTakesOnlyItsAnswers: when the connections to one
// Cluster master break, the answers read through them leave the table and
// those read from the other masters stay. (On one Redis, both leave.)
func TestABrokenConnectionTakesOnlyItsAnswers(t *testing.T) {
	srv, lc, rdb, _ := cachingClient(t)
	ctx := context.Background()
	// Two keys on different masters of a Cluster; one server otherwise.
	ka, kb := "lc:{a}", ""
	for i := 0; kb == ""; i++ {
		if k := fmt.Sprintf("lc:{b%d}", i); !redistest.Clustered() || srv.MasterOf(t, k) != srv.MasterOf(t, ka) {
			kb = k
		}
	}
	b := rdb.B()
	cmds := func() []rueidis.CacheableTTL {
		return []rueidis.CacheableTTL{rueidis.CT(b.Get().Key(ka).Cache(), time.Minute), rueidis.CT(b.Get().Key(kb).Cache(), time.Minute)}
	}
	for _, r := range rdb.DoMultiCache(ctx, cmds()...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
	}
	held := func(i int) bool { _, ok := lc.lookup(names(cmds())[i:i+1], time.Now()); return ok }
	if !held(0) || !held(1) {
		t.Fatalf("after rueidis cached both answers, the table holds %d", lc.size())
	}
	flushes := lc.Flushes()
	if redistest.Clustered() {
		srv.Node(srv.MasterOf(t, ka)).OnMasters(t, "CLIENT", "KILL", "TYPE", "normal")
	} else {
		srv.OnMasters(t, "CLIENT", "KILL", "TYPE", "normal")
	}
	waitUntil(t, func() bool { return !held(0) && lc.Flushes() > flushes })
	if redistest.Clustered() && !held(1) {
		t.Error("the connections to one master broke, and another master's answer left the table too")
	}
	if !redistest.Clustered() {
		waitUntil(t, func() bool { return !held(1) })
	}
}
