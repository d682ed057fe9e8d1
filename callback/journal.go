package main

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/lua"
	"github.com/freqcap/freqcap/shared/ids"
	"github.com/freqcap/freqcap/shared/redisconn"
)

// Journal is the durable log of accepted notices: a notice is answered 2xx
// only once it is in a Redis Stream, and leaves the stream only once the
// counter has answered for it. The log is spread over several stream keys
// (partitions, notices:{<p>}) so that on Redis Cluster the partitions land
// on different shards. Every callback instance reads every partition in one
// consumer group, so each entry goes to one instance; entries an instance
// took and did not acknowledge (it crashed, or gave up retrying) are claimed
// by any instance once they have been idle for the claim time.
type Journal struct {
	rdb      rueidis.Client
	keys     []string
	group    string
	consumer string
	perPart  int64 // maximum undelivered entries per partition
	// packed writes entries in one field (CALLBACK_JOURNAL_FORMAT=2);
	// either way, both are read.
	packed   bool
	next     atomic.Uint64
	lengths  []atomic.Int64 // each partition's length: sampled, plus this instance's appends since
	appended []atomic.Int64 // this instance's appends to each partition, ever

	// replicas is how many replicas an append must reach before it is
	// acknowledged (0: the master's answer is enough); then appends go
	// through one committer per partition (queues), see Replicate.
	replicas int64
	waitFor  time.Duration
	queues   []chan replicatedAppend
}

// replicatedAppend is one append waiting for its committer.
type replicatedAppend struct {
	ctx  context.Context
	cmd  rueidis.Completed
	done chan appendResult
}

// appendResult is Redis's answer to a replicated append, and the WAIT's
// verdict.
type appendResult struct {
	res rueidis.RedisResult
	err error
}

// entry is one notice read from the journal.
type entry struct {
	part int
	id   string
	n    notice
	bad  error // the entry could not be decoded
	// fails counts the answers in which the counter could not write this
	// entry while it wrote others (so Redis and the counter were up).
	fails int
}

// journalGroup is the consumer group every callback instance reads in.
const journalGroup = "callback"

// errJournalFull means the partition holds its maximum of undelivered
// notices: the counter has been unreachable for a while.
var errJournalFull = errors.New("journal full")

func journalKey(p int) string { return "notices:{" + strconv.Itoa(p) + "}" }

// Ping reports whether the journal's Redis answers.
func (j *Journal) Ping(ctx context.Context) error {
	return j.rdb.Do(ctx, j.rdb.B().Ping().Build()).Error()
}

func newJournal(rdb rueidis.Client, partitions, maxLen int, consumer string) *Journal {
	j := &Journal{rdb: rdb, group: journalGroup, consumer: consumer,
		perPart: int64((maxLen + partitions - 1) / partitions),
		lengths: make([]atomic.Int64, partitions), appended: make([]atomic.Int64, partitions)}
	for p := range partitions {
		j.keys = append(j.keys, journalKey(p))
	}
	return j
}

// sampleEvery is how often the partitions' lengths are read from Redis:
// the bound on the journal holds within what every instance appends in
// that time.
const sampleEvery = 100 * time.Millisecond

// Sample reads every partition's length (one round trip per node). The
// appends of this instance that finish while the sample is under way may
// be missing from what Redis answered, so they are added on top: the count
// may run a little high until the next sample, never low, and the journal
// never takes more than its maximum from one instance.
func (j *Journal) Sample(ctx context.Context) error { return j.sample(ctx, nil) }

// sample is Sample with other commands (trims) sent first in the same
// round trip.
func (j *Journal) sample(ctx context.Context, first rueidis.Commands) error {
	cmds := make(rueidis.Commands, 0, len(first)+len(j.keys))
	cmds = append(cmds, first...)
	before := make([]int64, len(j.keys))
	for p, k := range j.keys {
		cmds = append(cmds, j.rdb.B().Xlen().Key(k).Build())
		before[p] = j.appended[p].Load()
	}
	res := j.rdb.DoMulti(ctx, cmds...)
	for _, r := range res[:len(first)] {
		if err := r.Error(); err != nil {
			return err
		}
	}
	for p, r := range res[len(first):] {
		n, err := r.AsInt64()
		if err != nil {
			return err
		}
		j.lengths[p].Store(n + j.appended[p].Load() - before[p])
	}
	return nil
}

// KeepSampling trims what was delivered and samples the lengths until
// ctx ends.
func (j *Journal) KeepSampling(ctx context.Context) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sctx, cancel := context.WithTimeout(ctx, sampleEvery)
			// Two round trips: what to keep, then the trims and the
			// lengths after them.
			if trims, err := j.trims(sctx); err == nil {
				_ = j.sample(sctx, trims)
			}
			cancel()
		}
	}
}

// consumerName names this process in the consumer group: unique per run,
// so that a restarted instance claims what its predecessor left like any
// other instance does.
func consumerName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), ids.Random(""))
}

// Setup creates the consumer group on every partition (and the streams)
// and reads their lengths.
func (j *Journal) Setup(ctx context.Context) error {
	for p := range j.keys {
		if err := j.createGroup(ctx, p); err != nil {
			return err
		}
	}
	return j.Sample(ctx)
}

func (j *Journal) createGroup(ctx context.Context, p int) error {
	err := j.rdb.Do(ctx, j.rdb.B().XgroupCreate().Key(j.keys[p]).Group(j.group).Id("0").Mkstream().Build()).Error()
	if re, ok := rueidis.IsRedisErr(err); err != nil && !(ok && re.IsBusyGroup()) {
		return fmt.Errorf("journal %s: create consumer group: %w", j.keys[p], err)
	}
	return nil
}

// Append writes n to the next partition (one XADD); errJournalFull when
// the partition holds its maximum of undelivered notices. A signed notice
// (n.exp set) goes to the partition its fingerprint names, with a record
// of it kept until its URL expires, in the same script run: a notice sent
// again while its URL is valid is errDuplicate, and nothing is written.
func (j *Journal) Append(ctx context.Context, n notice) error {
	var fp string
	var p int
	if n.exp.IsZero() {
		p = int(j.next.Add(1) % uint64(len(j.keys)))
	} else {
		fp = fingerprint(n)
		p = int(binary.BigEndian.Uint64([]byte(fp)) % uint64(len(j.keys)))
	}
	if j.lengths[p].Load() >= j.perPart {
		return errJournalFull
	}
	var cmd rueidis.Completed
	var keys, args []string // of the script run
	if fp == "" {
		cmd = j.xadd(j.keys[p], j.fields(n, nil))
	} else {
		minute := n.exp.Unix() / 60
		args = j.fields(n, append(make([]string, 0, 12+2*len(n.dims)), fp, strconv.FormatInt((minute+1)*60+seenGrace, 10)))
		keys = []string{j.keys[p], seenKey(p, minute)}
		// Replicated appends go in a group on one connection: EVAL there,
		// so that a Redis without the script loaded needs no second trip.
		if j.queues == nil {
			cmd = j.rdb.B().Evalsha().Sha1(appendSHA).Numkeys(2).Key(keys...).Arg(args...).Build()
		} else {
			cmd = j.rdb.B().Eval().Script(lua.Append).Numkeys(2).Key(keys...).Arg(args...).Build()
		}
	}
	var res rueidis.RedisResult
	if j.queues == nil {
		res = j.rdb.Do(ctx, cmd)
		if fp != "" && isNoScript(res.Error()) {
			res = appendScript.Exec(ctx, j.rdb, keys, args)
		}
	} else {
		res = j.appendReplicated(ctx, p, cmd)
	}
	if err := res.Error(); err != nil {
		return err
	}
	if fp != "" {
		if id, err := res.AsInt64(); err == nil && id == 0 {
			return errDuplicate
		}
	}
	// Counted after Redis answered: an append that finishes while a sample
	// is under way is added on top of what the sample read (twice, at
	// worst, never missed).
	j.appended[p].Add(1)
	j.lengths[p].Add(1)
	return nil
}

// errDuplicate is a signed notice taken before: its URL was sent again
// while still valid.
var errDuplicate = errors.New("notice taken before")

var (
	appendScript = rueidis.NewLuaScript(lua.Append)
	appendSHA    = func() string { h := sha1.Sum([]byte(lua.Append)); return hex.EncodeToString(h[:]) }()
)

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// seenKey is the set of the fingerprints of partition p's signed notices
// whose URLs expire in that minute (unix seconds / 60): in the slot of
// the partition, so one script run writes both.
func seenKey(p int, minute int64) string {
	return "seen:{" + strconv.Itoa(p) + "}:" + strconv.FormatInt(minute, 10)
}

// seenGrace keeps a minute's records this long past its end, for a Redis
// whose clock runs ahead of callback's.
const seenGrace = 60

// fingerprint names a signed notice in 8 bytes: its event, campaign and
// event id (all signed). 64 bits leave a chance of about 10^-8 that two of
// the 600,000 notices expiring in one minute at 10,000 a second share one.
func fingerprint(n notice) string {
	h := sha256.New()
	h.Write([]byte(n.event))
	h.Write([]byte{0})
	h.Write([]byte(n.cid))
	h.Write([]byte{0})
	h.Write([]byte(n.eid))
	return string(h.Sum(nil)[:8])
}

// commitGroup is the most appends one committer sends before its WAIT.
const commitGroup = 512

// Replicate makes every append wait until n replicas have it (WAIT n),
// for at most timeout, before it is acknowledged; an append that reached
// fewer is errNotReplicated. WAIT counts what the connection it is sent on
// wrote, so each partition has a committer that sends the appends waiting
// for it on a connection of its own, followed by one WAIT for all of them
// (a group commit): one replica round trip per group, not per notice. The
// committers stop when ctx ends.
func (j *Journal) Replicate(ctx context.Context, n int, timeout time.Duration) {
	if n <= 0 {
		return
	}
	j.replicas, j.waitFor = int64(n), timeout
	j.queues = make([]chan replicatedAppend, len(j.keys))
	for p := range j.queues {
		j.queues[p] = make(chan replicatedAppend, commitGroup)
		go j.commit(ctx, p)
	}
}

func (j *Journal) appendReplicated(ctx context.Context, p int, cmd rueidis.Completed) rueidis.RedisResult {
	a := replicatedAppend{ctx: ctx, cmd: cmd, done: make(chan appendResult, 1)}
	select {
	case j.queues[p] <- a:
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
	select {
	case r := <-a.done:
		if r.err != nil {
			return rueidis.NewErrorResult(r.err)
		}
		return r.res
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
}

// commit sends partition p's waiting appends in groups, each followed by
// a WAIT.
func (j *Journal) commit(ctx context.Context, p int) {
	group := make([]replicatedAppend, 0, commitGroup)
	for {
		group = group[:0]
		select {
		case <-ctx.Done():
			return
		case a := <-j.queues[p]:
			group = append(group, a)
		}
	fill:
		for len(group) < commitGroup {
			select {
			case a := <-j.queues[p]:
				group = append(group, a)
			default:
				break fill
			}
		}
		j.commitGroup(ctx, group)
	}
}

func (j *Journal) commitGroup(ctx context.Context, group []replicatedAppend) {
	cmds := make(rueidis.Commands, 0, len(group)+1)
	sent := group[:0:0]
	for _, a := range group {
		if a.ctx.Err() != nil {
			continue // answered 503 already: not written
		}
		cmds = append(cmds, a.cmd)
		sent = append(sent, a)
	}
	if len(sent) == 0 {
		return
	}
	// WAIT answers before the first of the appends gives up.
	var first time.Time
	for _, a := range sent {
		if d, ok := a.ctx.Deadline(); ok && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	cmds = append(cmds, redisconn.Wait(j.rdb.B(), j.replicas, j.waitFor/2, first))
	ctx, cancel := context.WithTimeout(ctx, j.waitFor+time.Second)
	defer cancel()
	_ = j.rdb.Dedicated(func(c rueidis.DedicatedClient) error {
		rs := c.DoMulti(ctx, cmds...)
		werr := redisconn.Replicated(rs[len(rs)-1], j.replicas)
		for i, a := range sent {
			err := rs[i].Error()
			if err == nil {
				err = werr
			}
			a.done <- appendResult{res: rs[i], err: err}
		}
		return nil
	})
}

// fields appends a notice's stream fields and values to to: one field,
// packedField, whose value is packNotice's (CALLBACK_JOURNAL_FORMAT=2), or
// a field per value, as every version reads them: E, C, I, R (when it
// names a creative) and U (1 when its bid was not reserved), then its
// dimensions. A version that reads only a field per value would take an
// entry of one field for a malformed notice and drop it: the format is
// the operator's to raise once every callback reads both.
func (j *Journal) fields(n notice, to []string) []string {
	if j.packed {
		return append(to, packedField, packNotice(n))
	}
	to = append(to, "E", n.event, "C", n.cid, "I", n.eid)
	if n.crid != "" {
		to = append(to, "R", n.crid)
	}
	if n.unreserved {
		to = append(to, "U", "1")
	}
	for d, v := range n.dims {
		to = append(to, d, v)
	}
	return to
}

// packedField is the one field of a notice's journal entry. Its value
// holds, each as its length (a uvarint) and its bytes: the event, the
// campaign, the event id, the creative (empty for none), the flags ("u":
// the bid was not reserved), then each dimension's name and id. Any byte
// may appear in a value (a dimension is checked once the counter's schema
// is known, maybe after the append). One field costs Redis less to append
// (as an argument of XADD or of append.lua) and to answer in XREADGROUP
// than a field per value; it costs the stream the dimensions' names in
// every entry (a listpack keeps repeated field names once), about 11 bytes
// per undelivered notice. Entries written with a field per value are
// still read (decode).
const packedField = "N"

func packNotice(n notice) string {
	size := len(n.event) + len(n.cid) + len(n.eid) + len(n.crid) + 6
	for d, v := range n.dims {
		size += len(d) + len(v) + 4
	}
	b := make([]byte, 0, size)
	put := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	flags := ""
	if n.unreserved {
		flags = "u"
	}
	for _, s := range [...]string{n.event, n.cid, n.eid, n.crid, flags} {
		put(s)
	}
	for d, v := range n.dims {
		put(d)
		put(v)
	}
	return string(b)
}

// unpackNotice reads what packNotice wrote into n.
func unpackNotice(v string, n *notice) error {
	next := func() (string, bool) {
		size, k := binary.Uvarint([]byte(v[:min(len(v), binary.MaxVarintLen64)]))
		if k <= 0 || size > uint64(len(v)-k) {
			return "", false
		}
		s := v[k : k+int(size)]
		v = v[k+int(size):]
		return s, true
	}
	var flags string
	ok := true
	for _, to := range []*string{&n.event, &n.cid, &n.eid, &n.crid, &flags} {
		if *to, ok = next(); !ok {
			return fmt.Errorf("malformed %s field", packedField)
		}
	}
	n.unreserved = strings.Contains(flags, "u")
	for v != "" {
		d, ok1 := next()
		id, ok2 := next()
		if !ok1 || !ok2 {
			return fmt.Errorf("malformed %s field: a dimension is cut short", packedField)
		}
		n.dims[d] = id
	}
	return nil
}

// xadd appends an entry of fields and values to stream key.
func (j *Journal) xadd(key string, fields []string) rueidis.Completed {
	fv := j.rdb.B().Xadd().Key(key).Id("*").FieldValue()
	for i := 0; i+1 < len(fields); i += 2 {
		fv = fv.FieldValue(fields[i], fields[i+1])
	}
	return fv.Build()
}

// decode turns a stream entry back into its notice: its packedField, or
// (an entry written before there was one) a field per value.
func decode(p int, e rueidis.XRangeEntry) entry {
	out := entry{part: p, id: e.ID}
	n := notice{dims: make(map[string]string, 2)}
	if packed, ok := e.FieldValues[packedField]; ok {
		if err := unpackNotice(packed, &n); err != nil {
			out.bad = fmt.Errorf("journal entry %s of %s: %w", e.ID, journalKey(p), err)
		}
	} else {
		fieldPerValue(e.FieldValues, &n)
	}
	ms, _, _ := strings.Cut(e.ID, "-")
	if t, err := strconv.ParseInt(ms, 10, 64); err == nil {
		n.accepted = time.UnixMilli(t)
	}
	if out.bad == nil && (n.event == "" || n.cid == "" || n.eid == "" || len(n.dims) == 0) {
		out.bad = fmt.Errorf("journal entry %s of %s is not a notice: %v", e.ID, journalKey(p), e.FieldValues)
	}
	out.n = n
	return out
}

// fieldPerValue reads an entry written with a field per value: E, C, I
// and R are the event, campaign, event id and creative, U says the bid was
// not reserved (entries written before U existed have none: a win ends its
// bid's reservation, as then); every other field is a dimension
// (dimension names are lower case).
func fieldPerValue(fv map[string]string, n *notice) {
	for f, v := range fv {
		switch f {
		case "E":
			n.event = v
		case "C":
			n.cid = v
		case "I":
			n.eid = v
		case "R":
			n.crid = v
		case "U":
			n.unreserved = v == "1"
		case deadError, deadFrom:
			// A dead letter's own fields.
		default:
			n.dims[f] = v
		}
	}
}

func decodeAll(p int, es []rueidis.XRangeEntry) []entry {
	out := make([]entry, len(es))
	for i, e := range es {
		out[i] = decode(p, e)
	}
	return out
}

// Read takes up to count new entries of partition p for this consumer,
// waiting up to block for the first (block <= 0: not at all).
func (j *Journal) Read(ctx context.Context, p, count int, block time.Duration) ([]entry, error) {
	key := j.keys[p]
	c := j.rdb.B().Xreadgroup().Group(j.group, j.consumer).Count(int64(count))
	var cmd rueidis.Completed
	if block > 0 {
		cmd = c.Block(block.Milliseconds()).Streams().Key(key).Id(">").Build()
	} else {
		cmd = c.Streams().Key(key).Id(">").Build()
	}
	streams, err := j.rdb.Do(ctx, cmd).AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "NOGROUP") {
			// The stream was deleted (by hand, or FLUSHALL): start it again.
			if cerr := j.createGroup(ctx, p); cerr != nil {
				return nil, cerr
			}
		}
		return nil, err
	}
	return decodeAll(p, streams[key]), nil
}

// Claim takes up to count entries of partition p that have been pending
// with any consumer for at least idle, scanning from start; it returns the
// cursor to go on from ("0-0" once the scan is complete).
func (j *Journal) Claim(ctx context.Context, p int, idle time.Duration, start string, count int) ([]entry, string, error) {
	arr, err := j.rdb.Do(ctx, j.rdb.B().Xautoclaim().Key(j.keys[p]).Group(j.group).Consumer(j.consumer).
		MinIdleTime(strconv.FormatInt(idle.Milliseconds(), 10)).Start(start).Count(int64(count)).Build()).ToArray()
	if err != nil {
		return nil, "0-0", err
	}
	if len(arr) < 2 {
		return nil, "0-0", fmt.Errorf("XAUTOCLAIM %s: %d elements in the answer", j.keys[p], len(arr))
	}
	next, err := arr[0].ToString()
	if err != nil {
		return nil, "0-0", err
	}
	es, err := arr[1].AsXRange()
	if err != nil {
		return nil, "0-0", err
	}
	return decodeAll(p, es), next, nil
}

// Touch resets the idle time of entries this consumer is still delivering,
// so that no other instance claims them meanwhile.
func (j *Journal) Touch(ctx context.Context, es []entry) error {
	return j.perPartition(ctx, es, func(key string, ids []string) rueidis.Completed {
		return j.rdb.B().Xclaim().Key(key).Group(j.group).Consumer(j.consumer).MinIdleTime("0").Id(ids...).Justid().Build()
	})
}

// Ack acknowledges delivered entries; Trim removes them.
func (j *Journal) Ack(ctx context.Context, es []entry) error {
	return j.perPartition(ctx, es, func(key string, ids []string) rueidis.Completed {
		return j.rdb.B().Xack().Key(key).Group(j.group).Id(ids...).Build()
	})
}

// perPartition sends one command for each partition es come from, built by
// cmd from its key and the ids of its entries, all in one round trip per
// node; the first error is returned.
func (j *Journal) perPartition(ctx context.Context, es []entry, cmd func(key string, ids []string) rueidis.Completed) error {
	ids := make([][]string, len(j.keys))
	for _, e := range es {
		ids[e.part] = append(ids[e.part], e.id)
	}
	cmds := make(rueidis.Commands, 0, len(j.keys))
	for p, pids := range ids {
		if len(pids) > 0 {
			cmds = append(cmds, cmd(j.keys[p], pids))
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	for _, r := range j.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// Trim removes from every partition the entries before the oldest one not
// yet acknowledged: those that were never read (after the group's last
// delivered id) and those read but pending (from the oldest pending id) stay.
// It reads the group's last delivered id before the oldest pending id, so
// an entry read in between is after the former and stays too. One XTRIM
// MINID per partition every sampleEvery costs far less than an XDEL per
// delivered batch.
func (j *Journal) Trim(ctx context.Context) error {
	trims, err := j.trims(ctx)
	if err != nil || len(trims) == 0 {
		return err
	}
	for _, r := range j.rdb.DoMulti(ctx, trims...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// trims are the XTRIM commands that remove what was delivered, from one
// round trip of XINFO GROUPS and XPENDING on every partition.
func (j *Journal) trims(ctx context.Context) (rueidis.Commands, error) {
	cmds := make(rueidis.Commands, 0, 2*len(j.keys))
	for _, k := range j.keys {
		cmds = append(cmds, j.rdb.B().XinfoGroups().Key(k).Build(), j.rdb.B().Xpending().Key(k).Group(j.group).Build())
	}
	res := j.rdb.DoMulti(ctx, cmds...)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var trims rueidis.Commands
	for p, k := range j.keys {
		minID, ok := j.firstToKeep(res[2*p], res[2*p+1])
		if ok {
			trims = append(trims, j.rdb.B().Xtrim().Key(k).Minid().Exact().Threshold(minID.String()).Build())
		}
	}
	return trims, nil
}

// firstToKeep is the oldest entry id Trim must keep, from XINFO GROUPS and
// XPENDING.
func (j *Journal) firstToKeep(groups, pending rueidis.RedisResult) (streamID, bool) {
	gs, err := groups.ToArray()
	if err != nil {
		return streamID{}, false
	}
	var keep streamID
	found := false
	for _, g := range gs {
		m, err := g.AsMap()
		if err != nil {
			continue
		}
		nameMsg, lastMsg := m["name"], m["last-delivered-id"]
		if name, _ := nameMsg.ToString(); name != j.group {
			continue
		}
		last, _ := lastMsg.ToString()
		id, err := parseStreamID(last)
		if err != nil {
			return streamID{}, false
		}
		keep, found = id.next(), true
	}
	if !found {
		return streamID{}, false
	}
	summary, err := pending.ToArray()
	if err != nil || len(summary) < 2 {
		return streamID{}, false
	}
	if n, _ := summary[0].AsInt64(); n > 0 {
		oldest, _ := summary[1].ToString()
		id, err := parseStreamID(oldest)
		if err != nil {
			return streamID{}, false
		}
		if id.less(keep) {
			keep = id
		}
	}
	return keep, true
}

// streamID is a stream entry id, milliseconds-sequence.
type streamID struct{ ms, seq uint64 }

func parseStreamID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return streamID{}, fmt.Errorf("stream id %q", s)
	}
	return streamID{a, b}, nil
}

func (id streamID) next() streamID {
	if id.seq == ^uint64(0) {
		return streamID{id.ms + 1, 0}
	}
	return streamID{id.ms, id.seq + 1}
}

func (id streamID) String() string {
	return strconv.FormatUint(id.ms, 10) + "-" + strconv.FormatUint(id.seq, 10)
}

func (id streamID) less(o streamID) bool { return id.ms < o.ms || id.ms == o.ms && id.seq < o.seq }

// journalStats is the state of the whole journal.
type journalStats struct {
	undelivered int64         // entries in the streams
	pending     int64         // read by an instance, not yet acknowledged
	lag         time.Duration // age of the oldest undelivered entry
	dead        int64         // entries in the dead-letter stream
}

// Stats reads the length, pending count and oldest entry of every
// partition in one round trip per node.
func (j *Journal) Stats(ctx context.Context) (journalStats, error) {
	cmds := make(rueidis.Commands, 0, 3*len(j.keys))
	for _, k := range j.keys {
		cmds = append(cmds,
			j.rdb.B().Xlen().Key(k).Build(),
			j.rdb.B().Xpending().Key(k).Group(j.group).Build(),
			j.rdb.B().Xrange().Key(k).Start("-").End("+").Count(1).Build())
	}
	cmds = append(cmds, j.rdb.B().Xlen().Key(deadKey).Build())
	var st journalStats
	now := time.Now()
	res := j.rdb.DoMulti(ctx, cmds...)
	dead, err := res[len(res)-1].AsInt64()
	if err != nil {
		return st, err
	}
	st.dead = dead
	res = res[:len(res)-1]
	for i := 0; i < len(res); i += 3 {
		n, err := res[i].AsInt64()
		if err != nil {
			return st, err
		}
		st.undelivered += n
		if summary, err := res[i+1].ToArray(); err == nil && len(summary) > 0 {
			c, _ := summary[0].AsInt64()
			st.pending += c
		}
		if first, err := res[i+2].AsXRange(); err == nil && len(first) == 1 {
			if e := decode(0, first[0]); !e.n.accepted.IsZero() {
				st.lag = max(st.lag, now.Sub(e.n.accepted))
			}
		}
	}
	return st, nil
}

// consumer is one consumer of the group on a partition, as XINFO
// CONSUMERS tells it.
type consumer struct {
	name    string
	pending int64
	idle    time.Duration
}

// consumers are the group's consumers on partition key k.
func (j *Journal) consumers(ctx context.Context, k string) ([]consumer, error) {
	msgs, err := j.rdb.Do(ctx, j.rdb.B().XinfoConsumers().Key(k).Group(j.group).Build()).ToArray()
	if err != nil {
		return nil, err
	}
	cs := make([]consumer, 0, len(msgs))
	for _, c := range msgs {
		m, err := c.AsMap()
		if err != nil {
			continue
		}
		nameMsg, pendingMsg, idleMsg := m["name"], m["pending"], m["idle"]
		name, _ := nameMsg.ToString()
		pending, _ := pendingMsg.AsInt64()
		ms, _ := idleMsg.AsInt64()
		cs = append(cs, consumer{name: name, pending: pending, idle: time.Duration(ms) * time.Millisecond})
	}
	return cs, nil
}

// Forget removes consumers (earlier runs of callback) that hold no pending
// entry and have been idle for longer than idle, so the group does not
// grow with every restart.
func (j *Journal) Forget(ctx context.Context, idle time.Duration) (int, error) {
	forgotten := 0
	for _, k := range j.keys {
		consumers, err := j.consumers(ctx, k)
		if err != nil {
			return forgotten, err
		}
		for _, c := range consumers {
			if c.name == j.consumer || c.pending > 0 || c.idle < idle {
				continue
			}
			if err := j.rdb.Do(ctx, j.rdb.B().XgroupDelconsumer().Key(k).Group(j.group).Consumername(c.name).Build()).Error(); err != nil {
				return forgotten, err
			}
			forgotten++
		}
	}
	return forgotten, nil
}

// Active reports whether a consumer of the journal's group (a callback
// reading it) has read within the last within, forwarders on it as a
// moved journal (movedConsumer) aside: false for a journal no instance
// uses (or none ever made). Redis before 7.2 counts only the reads that
// took entries: an instance with nothing to read looks idle there.
func (j *Journal) Active(ctx context.Context, within time.Duration) (bool, error) {
	for _, k := range j.keys {
		consumers, err := j.consumers(ctx, k)
		if _, ok := rueidis.IsRedisErr(err); ok {
			continue // no such partition or group: no journal there
		}
		if err != nil {
			return false, err
		}
		for _, c := range consumers {
			if !strings.HasSuffix(c.name, movedConsumer) && c.idle < within {
				return true, nil
			}
		}
	}
	return false, nil
}

// deadKey is the dead-letter stream: notices the counter could not count
// and a retry would not mend (Redis refused their keys, say), moved out of
// their partitions so the partitions go on. An operator lists them, mends
// the cause and replays them (the admin API).
const deadKey = "notices:{dead}"

// A dead letter's fields beside the notice's: why it was moved, and the
// partition entry it came from.
const (
	deadError = "X"
	deadFrom  = "F"
)

// Bury moves entries to the dead-letter stream, each with its reason (one
// round trip); the caller acknowledges the originals once it returns nil.
// An entry buried but not acknowledged (callback died in between) is
// delivered again and may be buried twice; a replay of both counts once
// while the counter remembers its event id.
func (j *Journal) Bury(ctx context.Context, es []entry, why []string) error {
	cmds := make(rueidis.Commands, len(es))
	for i, e := range es {
		f := j.fields(e.n, nil)
		cmds[i] = j.xadd(deadKey, append(f, deadError, why[i], deadFrom, j.keys[e.part]+" "+e.id))
	}
	for _, r := range j.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// deadLetter is one entry of the dead-letter stream.
type deadLetter struct {
	ID    string            `json:"id"`
	Event string            `json:"event"`
	CID   string            `json:"cid"`
	CRID  string            `json:"crid,omitempty"`
	EID   string            `json:"eid"`
	Dims  map[string]string `json:"dims"`
	Error string            `json:"error"`
	From  string            `json:"from"`
}

// DeadLetters lists up to count dead letters after the id after ("" from
// the first), oldest first, and how many the stream holds.
func (j *Journal) DeadLetters(ctx context.Context, after string, count int) ([]deadLetter, int64, error) {
	start := "-"
	if after != "" {
		start = "(" + after
	}
	res := j.rdb.DoMulti(ctx,
		j.rdb.B().Xrange().Key(deadKey).Start(start).End("+").Count(int64(count)).Build(),
		j.rdb.B().Xlen().Key(deadKey).Build())
	es, err := res[0].AsXRange()
	if err != nil {
		return nil, 0, err
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return nil, 0, err
	}
	out := make([]deadLetter, len(es))
	for i, e := range es {
		d := decode(0, e).n
		out[i] = deadLetter{ID: e.ID, Event: d.event, CID: d.cid, CRID: d.crid, EID: d.eid, Dims: d.dims, Error: e.FieldValues[deadError], From: e.FieldValues[deadFrom]}
	}
	return out, n, nil
}

// Replay appends dead letters to the journal again, with their event ids
// (the counter counts each once), and removes them from the dead-letter
// stream: the ids given, or up to count from the oldest when ids is empty.
// It returns how many were replayed.
func (j *Journal) Replay(ctx context.Context, ids []string, count int) (int, error) {
	var es []rueidis.XRangeEntry
	if len(ids) == 0 {
		var err error
		if es, err = j.rdb.Do(ctx, j.rdb.B().Xrange().Key(deadKey).Start("-").End("+").Count(int64(count)).Build()).AsXRange(); err != nil {
			return 0, err
		}
	}
	for _, id := range ids {
		got, err := j.rdb.Do(ctx, j.rdb.B().Xrange().Key(deadKey).Start(id).End(id).Build()).AsXRange()
		if err != nil {
			return 0, err
		}
		es = append(es, got...)
	}
	n := 0
	for _, e := range es {
		d := decode(0, e)
		if d.bad != nil {
			return n, d.bad
		}
		if err := j.Append(ctx, d.n); err != nil {
			return n, err
		}
		if err := j.rdb.Do(ctx, j.rdb.B().Xdel().Key(deadKey).Id(e.ID).Build()).Error(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Discard removes dead letters for good; it returns how many there were.
func (j *Journal) Discard(ctx context.Context, ids []string) (int64, error) {
	return j.rdb.Do(ctx, j.rdb.B().Xdel().Key(deadKey).Id(ids...).Build()).AsInt64()
}
