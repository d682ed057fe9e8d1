package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/lua"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/deadline"
	"github.com/freqcap/freqcap/shared/redisconn"
)

// Store owns every Redis key and command of the counter. It knows no kind
// of counter: it validates nothing, looks each item's kind up in kinds,
// sends the commands of a call together (one pipelined round trip per Redis
// node) and enforces the read deadline.
type Store struct {
	rdb         rueidis.Client
	cluster     bool // rdb is a Redis Cluster's client
	loc         *time.Location
	now         func() time.Time
	wallClock   bool     // now is time.Now (no clock was injected)
	cached      []string // the dimensions read through client-side caching (a few: a scan beats hashing)
	cacheTTL    time.Duration
	dedupeTTL   time.Duration
	readTimeout time.Duration
	metrics     Metrics
	limits      Limits
	jobs        chan *readJob
	writeJobs   chan *writeJob
	retention   int
	reach       *redisconn.Reach
	known       *lastKnown  // nil when COUNTER_STALE_MAX is 0
	local       *LocalCache // nil: every read goes through a reader
	today       atomic.Pointer[dayBounds]
	knownHashes *knownHashes // nil when COUNTER_STALE_MAX is 0
	hot         *hotKeys     // nil when COUNTER_HOT_KEY_RATE is 0
	// stall is when Redis stopped answering reads in time (unix ns), 0
	// while it answers; probed is when the last PING of a stall ended,
	// probing is set while one is under way.
	stall, probed atomic.Int64
	probing       atomic.Bool
	// replicated is set when writes wait for replicas
	// (COUNTER_WRITE_REPLICAS).
	replicated *replicatedWrites
}

// env is the instant and settings one call builds its commands from.
func (s *Store) env() *env {
	now := s.now()
	return &env{
		b:         s.rdb.B(),
		cluster:   s.cluster,
		now:       now,
		loc:       s.loc,
		hour:      now.Unix() / 3600,
		dedupeTTL: s.dedupeTTL,
		retention: s.retention,
		today:     &s.today,
	}
}

// Write counts every item (Hits > 0), each with its kind's script; the
// runs go out together, so the call costs one round trip per node. Items
// of one tag that are parts of lua/count.lua share one run when they count
// the same event (the day and the hour buckets of one dimension). Items on
// one counter run in their order, one after the other. Results are in item
// order; an item Redis could not count carries its own code (writes do not
// degrade: the caller retries).
//
// Concurrent calls share batches: at most writers batches are in flight,
// and the calls that arrive meanwhile go out together in the next one
// (their events on one counter then share runs). A call alone goes out at
// once.
//
// A ctx of deadline.Within is kept to its deadline to the instant: the
// batch is given its hand-off context (deadline.Handoff).
func (s *Store) Write(ctx context.Context, items []counting.Item) []counting.Result {
	j := &writeJob{ctx: deadline.Handoff(ctx), items: items, done: make(chan []counting.Result, 1)}
	if err := deadline.Send(s.writeJobs, j, ctx); err != nil {
		return s.failWrite(len(items), err)
	}
	res, ok, err := deadline.Wait(j.done, ctx)
	if !ok {
		// Sent, or about to be: Redis may still count it; a retry with the
		// same event ids counts once.
		return s.failWrite(len(items), err)
	}
	return res
}

// writers is how many write batches may be in flight at once.
const writers = 4

// maxWriteItems is the most items the calls sharing one batch hold.
const maxWriteItems = 2000

// writeJob is one Write call waiting for its batch.
type writeJob struct {
	ctx   context.Context
	items []counting.Item
	done  chan []counting.Result
}

func (s *Store) startWriters() {
	s.writeJobs = make(chan *writeJob, 4096)
	for range writers {
		go func() {
			for j := range s.writeJobs {
				s.writeBatch(j)
			}
		}()
	}
}

// writeBatch writes first and the calls waiting behind it in one batch,
// within the latest of their deadlines.
func (s *Store) writeBatch(first *writeJob) {
	jobs, n := []*writeJob{first}, len(first.items)
collect:
	for n < maxWriteItems {
		select {
		case j, ok := <-s.writeJobs:
			if !ok {
				break collect
			}
			jobs, n = append(jobs, j), n+len(j.items)
		default:
			break collect
		}
	}
	if len(jobs) == 1 {
		first.done <- s.write(first.ctx, first.items)
		return
	}
	all := make([]counting.Item, 0, n)
	var deadline time.Time
	live := jobs[:0]
	for _, j := range jobs {
		if err := j.ctx.Err(); err != nil {
			j.done <- s.failWrite(len(j.items), err) // gone: not written
			continue
		}
		if d, ok := j.ctx.Deadline(); !ok {
			deadline = time.Now().Add(time.Minute)
		} else if d.After(deadline) {
			deadline = d
		}
		all = append(all, j.items...)
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(live[0].ctx), deadline)
	defer cancel()
	res := s.write(ctx, all)
	for _, j := range live {
		j.done <- res[:len(j.items):len(j.items)]
		res = res[len(j.items):]
	}
}

// failWrite answers n items of a write that did not reach Redis in time.
func (s *Store) failWrite(n int, err error) []counting.Result {
	res := make([]counting.Result, n)
	for i := range res {
		res[i] = s.writeFailed(err)
	}
	return res
}

// writeFailed is the answer of an item Redis did not count: retry it,
// unless Redis refused the item itself (Internal: a retry will not help).
func (s *Store) writeFailed(err error) counting.Result {
	if refusedByRedis(err) {
		return counting.Result{Code: apierr.Internal, Msg: "redis refused the write, a retry will not help: " + firstLine(err)}
	}
	return counting.Result{Code: s.code(err), Msg: "redis unavailable, retry: " + firstLine(err)}
}

// refusedByRedis reports an error Redis answered for the command itself,
// which the same command will meet again: a key of the wrong type (one
// written by hand over a counter's), a value that is not a number, an
// error inside a script. Errors of the moment (OOM, LOADING, BUSY,
// TRYAGAIN, CLUSTERDOWN, READONLY, NOREPLICAS, NOSCRIPT, redirects,
// connections, timeouts) are not.
func refusedByRedis(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := re.Error()
	return strings.HasPrefix(msg, "WRONGTYPE") ||
		strings.HasPrefix(msg, "ERR") && !strings.Contains(msg, "max number of clients")
}

// write is Write of one batch.
func (s *Store) write(ctx context.Context, items []counting.Item) []counting.Result {
	e := s.env()
	runs := s.runs(items, e)
	cmds := make(rueidis.Commands, len(runs))
	for k, r := range runs {
		if r.fn != nil {
			// The first run's slot picks the pipeline's connection.
			cmds[k] = r.fn.fcall(s.rdb, r.keys, r.args, s.cluster || k == 0)
		} else {
			cmds[k] = r.script.evalsha(s.rdb, r.keys, r.args)
		}
	}
	// One DoMulti: one pipelined round trip per node.
	out := s.doWrites(ctx, cmds)
	var again []int // runs Redis answered NOSCRIPT or "Function not found"
	missing := false
	for k, r := range out {
		if err := r.Error(); isNoScript(err) || isNoFunction(err) {
			again = append(again, k)
			missing = missing || isNoFunction(err)
		}
	}
	if len(again) > 0 {
		s.again(ctx, runs, again, missing, out)
	}
	s.reach.Observe(firstErr(out))
	res := make([]counting.Result, len(items))
	for k, run := range runs {
		s.answerRun(run, out[k], items, e, res)
	}
	return res
}

// answerRun puts in res the answers of run's items from Redis's answer
// to it, out.
func (s *Store) answerRun(run *scriptRun, out rueidis.RedisResult, items []counting.Item, e *env, res []counting.Result) {
	v, err := out.AsIntSlice()
	if err == nil && run.quiet && len(v) != len(run.eids) {
		err = fmt.Errorf("count function returned %d values for a quiet run of %d events", len(v), len(run.eids))
	}
	for p, i := range run.items {
		it, r := &items[i], &res[i]
		r.Allowed = true
		vals, ierr := v, err
		switch {
		case ierr != nil:
		case run.quiet:
			// Event p/np's answer: the counters it was counted on before,
			// bit j for its j-th (its items are in the order of its parts).
			np := len(run.keys) - 1
			r.Duplicate = v[p/np]>>(p%np)&1 == 1
		case run.counts():
			// Each part's answer is its length, then its values.
			vals, v, ierr = splitPart(v)
		}
		if ierr == nil && !run.quiet {
			ierr = kindOf(it.Spec.Kind).wrote(it, e, vals, r)
			if it.Quiet && run.counts() {
				// In a run that answers counts for another item of its
				// event: a quiet item answers none.
				r.Count, r.TTLMs = 0, 0
			}
		}
		if ierr != nil {
			s.metrics.RedisError("write")
			*r = s.writeFailed(ierr)
			continue
		}
		if r.Duplicate {
			s.metrics.Duplicate()
		}
	}
}

// again sends the runs Redis did not have the script or the function of
// (again, in order) once more: by EVAL, and by FCALL once the count
// library is loaded (missing). All the runs of one tag use the same script
// or function, so they are all here and go again in their order (unless
// another request loaded it in the middle of this batch: then a counter's
// later run may have gone before an earlier one, which only swaps their
// answers).
func (s *Store) again(ctx context.Context, runs []*scriptRun, again []int, missing bool, out []rueidis.RedisResult) {
	if missing {
		// Were it not loaded, the runs answer "Function not found" again:
		// their error says so. (One library holds both functions.)
		_ = countFunction.load(ctx, s.rdb)
	}
	cmds := make(rueidis.Commands, len(again))
	for k, p := range again {
		if r := runs[p]; r.fn != nil {
			cmds[k] = r.fn.fcall(s.rdb, r.keys, r.args, s.cluster || k == 0)
		} else {
			cmds[k] = r.script.eval(s.rdb, r.keys, r.args)
		}
	}
	for k, r := range s.doWrites(ctx, cmds) {
		out[again[k]] = r
	}
}

// doWrites sends a write's script runs, waiting for the replicas when
// COUNTER_WRITE_REPLICAS asks for them.
func (s *Store) doWrites(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	if s.replicated == nil {
		return s.rdb.DoMulti(ctx, cmds...)
	}
	return s.replicated.DoMulti(ctx, cmds)
}

// scriptRun is one script run of a write and the items it answers, in order.
type scriptRun struct {
	script     *script
	fn         *function // instead of script: a function of the library
	keys, args []string
	items      []int
	hits       int64
	// A run of lua/count.lua counts events (eids, in order) that have the
	// same parts (partArgs: each part's name and arguments) on the same
	// counters (keys after the first). A quiet run (every item of it
	// quiet) answers only where each event was counted before.
	eids     []string
	partArgs []string
	quiet    bool
}

// counts reports a run of lua/count.lua (its parts).
func (r *scriptRun) counts() bool { return r.fn == countFunction }

// maxEvents is the most events one run of lua/count.lua counts.
const maxEvents = 100

// runs turns items into script runs, in the order they go out: the runs of
// one tag (of one counter, for kinds with a script of their own) one after
// the other in item order. A part joins the latest run of its tag when that
// run counts the same event (same event id and hits), so the order of the
// items on every counter is kept. Then the consecutive runs of a tag that
// count different event ids with the same parts merge into one run that
// counts them all (a hot bundle's notices in one batch: one run, not one
// per notice); lua/count.lua answers each event as if it ran alone.
func (s *Store) runs(items []counting.Item, e *env) []*scriptRun {
	// groups holds the runs of each tag (or counter key), in order.
	groups := make(map[string][]*scriptRun, len(items))
	order := make([]string, 0, len(items))
	for i := range items {
		it := &items[i]
		w := kindOf(it.Spec.Kind).write(it, e)
		group := w.keys[0]
		if w.part != "" {
			group = Dedupe(it)
		}
		rs, ok := groups[group]
		if !ok {
			order = append(order, group)
		}
		if w.part == "" {
			groups[group] = append(rs, &scriptRun{script: w.script, fn: w.fn, keys: w.keys, args: w.args, items: []int{i}})
			continue
		}
		var r *scriptRun
		if n := len(rs); n > 0 && rs[n-1].counts() && rs[n-1].hits == it.Hits && rs[n-1].eids[0] == it.EventID {
			r = rs[n-1]
		} else {
			// Sized for the usual run: one dimension's day and hours.
			r = &scriptRun{fn: countFunction, hits: it.Hits, eids: []string{it.EventID}, quiet: true,
				keys: append(make([]string, 0, 3), group), items: make([]int, 0, 2), partArgs: make([]string, 0, 8)}
			groups[group] = append(rs, r)
		}
		r.quiet = r.quiet && it.Quiet
		r.items = append(r.items, i)
		r.keys = append(r.keys, w.keys[0])
		r.partArgs = append(append(r.partArgs, w.part), w.args...)
	}
	out := make([]*scriptRun, 0, len(items))
	for _, g := range order {
		rs := groups[g]
		for k, r := range rs {
			if k > 0 && r.counts() {
				last := out[len(out)-1]
				if mergeable(last, r) {
					last.eids = append(last.eids, r.eids[0])
					last.items = append(last.items, r.items...)
					continue
				}
			}
			out = append(out, r)
		}
	}
	finishRuns(out, e)
	return out
}

// finishRuns gives the runs of count.lua their arguments.
func finishRuns(out []*scriptRun, e *env) {
	now, dedupeTTL := strconv.FormatInt(e.now.UnixMilli(), 10), strconv.FormatInt(e.dedupeTTL.Milliseconds(), 10)
	for _, r := range out {
		if r.counts() {
			ttl := "0" // no event id
			if r.eids[0] != "" {
				ttl = dedupeTTL
			}
			events := strconv.Itoa(len(r.eids))
			if r.quiet {
				events = "-" + events
			}
			r.args = make([]string, 0, 4+len(r.eids)+len(r.partArgs))
			r.args = append(append(append(r.args, strconv.FormatInt(r.hits, 10), now, ttl, events), r.eids...), r.partArgs...)
		}
	}
}

// mergeable reports whether run b (one event) can join run a: both count
// an event id (different ones, b's not yet in a) with the same hits and the
// same parts on the same counters, none of them twice, and both answer
// counts or neither does.
func mergeable(a, b *scriptRun) bool {
	if !a.counts() || a.eids[0] == "" || b.eids[0] == "" || a.hits != b.hits || a.quiet != b.quiet || len(a.eids) >= maxEvents ||
		!slices.Equal(a.keys, b.keys) || !slices.Equal(a.partArgs, b.partArgs) || slices.Contains(a.eids, b.eids[0]) {
		return false
	}
	counters := a.keys[1:]
	for i, k := range counters {
		if slices.Contains(counters[i+1:], k) {
			return false
		}
	}
	return true
}

// The library (lua.Library) and its functions: count.lua, that every run
// of parts calls, and limit.lua, that every rate-limit check calls. Both
// load the whole library.
var (
	librarySrc, libraryFns = lua.Library()
	countFunction          = &function{src: librarySrc, name: libraryFns.Count}
	limitFunction          = &function{src: librarySrc, name: libraryFns.Limit}
)

// Library is the library's source and its functions' names, for tests
// and tools that load it first (FUNCTION LOAD) and call it (FCALL).
func Library() (src string, fns lua.Functions) { return librarySrc, libraryFns }

// splitPart takes one part's answer off the front of a count.lua answer:
// its length, then its values.
func splitPart(v []int64) (part, rest []int64, err error) {
	if len(v) == 0 || v[0] < 1 || v[0] > int64(len(v)-1) {
		return nil, nil, fmt.Errorf("count script returned %d values, short of a part", len(v))
	}
	n := int(v[0])
	return v[1 : 1+n], v[1+n:], nil
}

// Code is the answer code of a Redis call that failed with err: a timeout
// (10001) while Redis is reachable but slow (a dial that ran out of time
// included), unavailable (10004) when it refuses connections or the
// connection is gone, even when the call then ran out of time waiting for
// rueidis to reconnect.
func (s *Store) Code(err error) int { return s.code(err) }

func (s *Store) code(err error) int {
	if (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && !s.reach.Down() {
		return apierr.Timeout
	}
	return apierr.Unavailable
}

// Read answers every item (Hits == 0) with one pipelined round trip per
// Redis node: items of cached dimensions through client-side caching, the
// others straight from Redis. It returns within the read timeout whatever
// Redis does; an item that could not be read in time carries its code,
// Degraded and zero counts (failing open is the caller's decision).
func (s *Store) Read(ctx context.Context, items []counting.Item) []counting.Result {
	res, _ := s.ReadInto(ctx, items, nil)
	return res
}

// ReadInto is Read answering in into when it holds len(items) results
// (whatever they held before is overwritten), so that a caller that reads
// often can reuse its items and results. held reports that a reader still
// holds items and into: a read past its deadline leaves them to the reader
// answering it, and answers in another slice. Reuse neither then.
func (s *Store) ReadInto(ctx context.Context, items []counting.Item, into []counting.Result) (res []counting.Result, held bool) {
	res, held = s.readOrSkip(ctx, items, into)
	if n := s.known.fill(items, res, s.now); n > 0 {
		s.metrics.StaleReads(n)
	}
	return res, held
}

// readOrSkip reads items from Redis, or, while Redis has answered no read
// in time (a stall), answers them from the process's table when it holds
// them all, else failed at once. During a stall a PING
// goes to Redis at most every probeEvery, one at a time; its answer ends
// the stall. A stall begins with a read that ran out of time (or found no
// connection) with every item failed; on a Cluster, a PING any live node
// answers ends it.
func (s *Store) readOrSkip(ctx context.Context, items []counting.Item, into []counting.Result) (res []counting.Result, held bool) {
	if s.stalled() {
		// What the process's table holds is as fresh as it is outside a
		// stall: Redis's invalidations come on the connection that read
		// it, a connection that breaks empties the table, and an answer
		// lives at most the client-side TTL.
		e := s.env()
		res, through, ok := s.readLocal(items, e, into)
		if ok {
			return res, false
		}
		s.metrics.RedisError("read")
		res = s.failAll(len(items), errStalled)
		if s.local != nil && slices.Contains(through, true) {
			var p readPlan
			s.plan(&p, items, e, through)
			s.metrics.Cache(len(p.local), 0)
			s.answerHeld(items, &p, e, res)
		}
		return res, false
	}
	res, late, held, p := s.readWithin(ctx, items, into)
	if p == nil {
		return res, false // nothing went to Redis
	}
	// A stall begins when every count that went to Redis failed (those the
	// table held answer either way). rueidis may answer a deadline a
	// moment before the context's own timer fires: a result's code says it
	// ran out of time too.
	down := s.reach.Down()
	sent, failed := false, true
	for i := range res {
		if p.at[i].src == fromLocal {
			continue
		}
		sent = true
		failed = failed && res[i].Degraded && (late || down || res[i].Code == apierr.Timeout)
	}
	if sent && failed {
		s.startStall()
	}
	return res, held
}

// answerHeld answers in res, fresh, the items of p whose counts the
// process's table held (p.local), for a read whose other counts Redis
// did not answer: its deadline passed, or Redis is stalled. e is the
// caller's own env (the plan's may be a reader's still).
func (s *Store) answerHeld(items []counting.Item, p *readPlan, e *env, res []counting.Result) {
	var held []int
	for i := range items {
		if p.at[i].src == fromLocal {
			held = append(held, i)
		}
	}
	if len(held) == 0 {
		return
	}
	sub, at := make([]counting.Item, len(held)), make([]span, len(held))
	for k, i := range held {
		sub[k], at[k] = items[i], p.at[i]
	}
	got := s.answer(sub, e, at, p.buckets, answers{local: p.local}, nil)
	for k, i := range held {
		res[i] = got[k]
	}
}

// WriteOrSkip is Write for a caller that waits on the answer (a rate-limit
// check, a view, AddFreq): during a stall it answers every item failed at
// once (10001) instead of waiting out its deadline, and a write whose
// every item ran out of time starts a stall, as a read does.
func (s *Store) WriteOrSkip(ctx context.Context, items []counting.Item) []counting.Result {
	if s.stalled() {
		s.metrics.RedisError("write")
		return s.failWrite(len(items), errStalled)
	}
	res := s.Write(ctx, items)
	late, down := deadline.Passed(ctx), s.reach.Down()
	failed := len(res) > 0
	for i := range res {
		failed = failed && res[i].Code != 0 && (late || down || res[i].Code == apierr.Timeout)
	}
	if failed {
		s.startStall()
	}
	return res
}

// Guarded runs call, a Redis call outside the kinds that a caller waits
// on (the view counter's), under the same rule: skipped with errStalled
// during a stall, and one that ran out of time starts a stall.
func (s *Store) Guarded(ctx context.Context, call func(context.Context) error) error {
	if s.stalled() {
		return errStalled
	}
	err := call(ctx)
	if err != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || s.reach.Down()) {
		s.startStall()
	}
	return err
}

// stalled reports a stall, sending Redis a PING at most every probeEvery
// while it lasts.
func (s *Store) stalled() bool {
	if s.stall.Load() == 0 {
		return false
	}
	if time.Now().UnixNano()-s.probed.Load() >= int64(probeEvery) && s.probing.CompareAndSwap(false, true) {
		go s.probe()
	}
	return true
}

// startStall begins a stall after a call that ran out of time.
func (s *Store) startStall() {
	if s.stall.CompareAndSwap(0, time.Now().UnixNano()) && s.probing.CompareAndSwap(false, true) {
		// Ask at once: a read too big for the deadline fails whole on a
		// Redis that is fine, and the PING says so within a millisecond.
		go s.probe()
	}
}

// probe asks Redis for a PING within the read timeout; an answer ends the
// stall. A read that failed because it was too big for the deadline does
// not keep the others waiting: Redis answers the PING.
func (s *Store) probe() {
	defer func() { s.probed.Store(time.Now().UnixNano()); s.probing.Store(false) }()
	ctx, cancel := context.WithTimeout(context.Background(), s.readTimeout)
	defer cancel()
	if s.rdb.Do(ctx, s.rdb.B().Ping().Build()).Error() == nil {
		s.stall.Store(0)
	}
}

// probeEvery is how often a PING goes to Redis during a stall.
const probeEvery = 50 * time.Millisecond

var errStalled = fmt.Errorf("redis answered no read in time lately, not waiting on it: %w", context.DeadlineExceeded)

// readWithin reads items within the read timeout, whatever Redis does;
// late says the time ran out, p is the read's plan (nil when the table
// held every count). A read whose every count is cached in this process
// is answered on the caller's goroutine; any other goes to a reader, so
// that a call rueidis holds past its context (some reconnect paths do)
// never holds the caller. When the time runs out, the counts the table
// held still answer, fresh.
func (s *Store) readWithin(ctx context.Context, items []counting.Item, into []counting.Result) (res []counting.Result, late, held bool, p *readPlan) {
	e := s.env()
	res, through, ok := s.readLocal(items, e, into)
	if ok {
		return res, false, false, nil
	}
	j := &readJob{items: items, into: into}
	p = &j.plan
	s.plan(p, items, e, through)
	if len(p.local) > 0 {
		s.metrics.Cache(len(p.local), 0)
	}
	if len(p.cached) == 0 && len(p.direct) == 0 {
		// The table held every answer after all.
		return s.answer(items, p.e, p.at, p.buckets, answers{local: p.local}, into), false, false, p
	}
	// One timer per tick of the reads of the moment, not one per read, and
	// the deadline kept to the instant (deadline.Handoff and Wait).
	ctx, cancel := deadline.Within(ctx, s.readTimeout)
	defer cancel()
	j.ctx, j.done = deadline.Handoff(ctx), make(chan []counting.Result, 1)
	select {
	case s.jobs <- j:
	default:
		// Every reader is stuck on a hung Redis and the queue is full:
		// answer now rather than pile up.
		s.metrics.RedisError("read")
		return s.heldOr(items, p, errReadersBusy), true, false, p
	}
	// rueidis may block past the context in some reconnect paths; the
	// caller's deadline wins.
	res, ok, err := deadline.Wait(j.done, ctx)
	if !ok {
		// The reader still holds the job (items, into).
		s.metrics.RedisError("read")
		return s.heldOr(items, p, err), true, true, p
	}
	return res, deadline.Passed(ctx), false, p
}

// heldOr answers a read that Redis did not answer: the counts the table
// held (p.local) fresh, the others failed with err. A reader may still be
// answering p: only its read-only parts are used, with an env of the
// caller's own at the plan's instant.
func (s *Store) heldOr(items []counting.Item, p *readPlan, err error) []counting.Result {
	res := s.failAll(len(items), err)
	if len(p.local) > 0 {
		e := s.env()
		e.now, e.hour = p.e.now, p.e.hour
		s.answerHeld(items, p, e, res)
	}
	return res
}

// readJob is one Read handed to a reader goroutine.
type readJob struct {
	ctx   context.Context
	items []counting.Item
	into  []counting.Result // the answer's room, when it fits
	plan  readPlan          // in the job: one allocation for both
	done  chan []counting.Result
}

// readers is how many goroutines serve reads, and how many more reads may
// wait for one. Long-lived readers keep their grown stacks, so a read costs
// no goroutine start, and a hung Redis holds at most this many.
const readers = 256

var errReadersBusy = errors.New("every reader is waiting on redis")

func (s *Store) startReaders() {
	s.jobs = make(chan *readJob, readers)
	for range readers {
		go func() {
			for j := range s.jobs {
				j.done <- s.read(j.ctx, j.items, &j.plan, j.into)
			}
		}()
	}
}

// Close stops the readers, the writers and the hot-key window.
func (s *Store) Close() {
	close(s.jobs)
	close(s.writeJobs)
	s.hot.close()
}

func (s *Store) failAll(n int, err error) []counting.Result {
	res := make([]counting.Result, n)
	for i := range res {
		s.degrade(&res[i], err)
	}
	return res
}

// degrade makes r the answer of a read that failed with err.
func (s *Store) degrade(r *counting.Result, err error) {
	*r = counting.Result{Code: s.code(err), Msg: "counts unavailable, answered 0: " + firstLine(err), Allowed: true, Degraded: true}
}

// span is where one item's answers sit: in the plan's local answers, the
// cached commands' or the direct ones'.
type span struct {
	src      source
	from, to int
}

// source is which list a span indexes.
type source uint8

const (
	fromDirect source = iota
	fromCached
	fromLocal
)

// readPlan is the commands of one read: those through client-side caching,
// those straight to Redis, the answers the process's table already held
// (with their decoded hour buckets), and where each item's are.
type readPlan struct {
	e       *env
	cached  []rueidis.CacheableTTL
	direct  rueidis.Commands
	local   []rueidis.RedisResult
	buckets [][]bucket // of local
	at      []span
	// Room for a small read's spans and direct commands (a device's day
	// and hours), so that they take no allocation of their own.
	atBuf     [4]span
	directBuf [4]rueidis.Completed
}

// plan builds into p the commands that read items; through, when not nil,
// says which go through client-side caching (throughCache, already asked).
// A read of a few items keeps its spans and direct commands in p itself.
func (s *Store) plan(p *readPlan, items []counting.Item, e *env, through []bool) {
	p.e = e
	if n := len(items); n <= len(p.atBuf) {
		p.at, p.direct = p.atBuf[:n], p.directBuf[:0]
	} else {
		p.at, p.direct = make([]span, n), make(rueidis.Commands, 0, 2*n)
	}
	ms := s.localNow(e).UnixMilli()
	for i := range items {
		it := &items[i]
		if i > 0 && sameHours(&items[i-1], it) {
			p.at[i] = p.at[i-1] // the previous window's HGETALL holds this one's hours
			continue
		}
		th := through != nil && through[i] || through == nil && s.throughCache(it)
		if th && s.local != nil {
			// Already in the process's table (a bundle's count beside a new
			// device's, say): answered from there, not through rueidis.
			if r, bs, ok := s.local.lookupItem(it, ms); ok {
				p.at[i] = span{src: fromLocal, from: len(p.local), to: len(p.local) + 1}
				if p.local == nil {
					// Room for every item left that may be held (a
					// bidder's every candidate on one bundle): grown
					// by appends, they took twice that.
					n := len(items) - i
					if through != nil {
						n = trues(through[i:])
					}
					p.local, p.buckets = make([]rueidis.RedisResult, 0, n), make([][]bucket, 0, n)
				}
				p.local, p.buckets = append(p.local, r), append(p.buckets, bs)
				continue
			}
		}
		cmds, cacheable := kindOf(it.Spec.Kind).read(it, p.e)
		if cacheable && th {
			p.at[i] = span{src: fromCached, from: len(p.cached), to: len(p.cached) + len(cmds)}
			if p.cached == nil {
				p.cached = make([]rueidis.CacheableTTL, 0, 2*(len(items)-i))
			}
			for _, c := range cmds {
				p.cached = append(p.cached, rueidis.CT(c, s.cacheTTL))
			}
			continue
		}
		p.at[i] = span{from: len(p.direct), to: len(p.direct) + len(cmds)}
		for _, c := range cmds {
			p.direct = append(p.direct, rueidis.Completed(c))
		}
	}
	if !s.cluster && len(p.direct) > 0 {
		// Its keys have no slot (env.read): rueidis picks the pipeline's
		// connection by its first command's, as it did when each key had
		// one. (The cached ones go by one connection.)
		p.direct[0] = p.direct[0].SetSlot(p.direct[0].Commands()[1])
	}
}

// trues is how many of bs are true.
func trues(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// readLocal answers a read whose every count is cached in this process
// (LocalCache), on the caller's goroutine, without building a command;
// ok is false when any is not. through says which items go through
// client-side caching, for the plan of a read that goes to Redis.
func (s *Store) readLocal(items []counting.Item, e *env, into []counting.Result) (res []counting.Result, through []bool, ok bool) {
	if s.local == nil || len(items) == 0 {
		return nil, nil, false
	}
	// A read of a few items builds its through and its plan on the stack:
	// through leaves only when the read goes to Redis after all.
	var throughBuf [16]bool
	var atBuf [16]span
	var bucketsBuf [16][]bucket
	th, at := throughBuf[:0], atBuf[:0]
	ok = true
	for i := range items {
		if i > 0 && sameHours(&items[i-1], &items[i]) {
			th = append(th, th[i-1])
			continue
		}
		th = append(th, s.throughCache(&items[i]))
		ok = ok && th[i]
	}
	if !ok {
		return nil, slices.Clone(th), false
	}
	// Every item's answer is one cached command's, the hour windows of a
	// counter sharing theirs.
	n := 0
	for i := range items {
		if i > 0 && sameHours(&items[i-1], &items[i]) {
			at = append(at, at[i-1])
			continue
		}
		at = append(at, span{src: fromLocal, from: n, to: n + 1})
		n++
	}
	rs, buckets, ok := s.local.lookupItems(items, at, s.localNow(e), bucketsBuf[:0])
	if !ok {
		return nil, slices.Clone(th), false
	}
	s.metrics.Cache(len(rs), 0)
	return s.answer(items, e, at, buckets, answers{local: rs}, into), nil, true
}

// localNow is the instant client-side TTLs are compared with: they are
// wall-clock instants, so the call's own instant serves unless a test
// stands the store elsewhere in time.
func (s *Store) localNow(e *env) time.Time {
	if !s.wallClock {
		return time.Now()
	}
	return e.now
}

// read sends a plan's commands to Redis and answers from what came back.
func (s *Store) read(ctx context.Context, items []counting.Item, p *readPlan, into []counting.Result) []counting.Result {
	cached, direct := s.send(ctx, p.cached, p.direct)
	return s.answer(items, p.e, p.at, p.buckets, answers{direct: direct, cached: cached, local: p.local}, into)
}

// answers are a read's answers: its direct and cached commands' from
// Redis, and those the process's table held.
type answers struct{ direct, cached, local []rueidis.RedisResult }

// answer decodes each item's answers (at[i]: where item i's are) and
// remembers them (last-known values). buckets are the local answers' hour
// buckets, as the table decoded them. (Each slice is its own argument:
// what reaches a kind's got leaves for the heap, and at and buckets need
// not.)
func (s *Store) answer(items []counting.Item, e *env, at []span, buckets [][]bucket, got answers, into []counting.Result) []counting.Result {
	res := into
	if len(res) == len(items) {
		clear(res)
	} else {
		res = make([]counting.Result, len(items))
	}
	for i := range items {
		rs := got.direct
		switch at[i].src {
		case fromCached:
			rs = got.cached
		case fromLocal:
			rs = got.local
		}
		rs = rs[at[i].from:at[i].to]
		if at[i].src == fromLocal {
			e.hoursMemo.decoded(&rs[0], buckets[at[i].from])
		}
		r := &res[i]
		r.Allowed = true
		err := firstErr(rs)
		if err == nil {
			err = kindOf(items[i].Spec.Kind).got(&items[i], e, rs, r)
		}
		if err != nil {
			s.metrics.RedisError("read")
			s.degrade(r, err)
		}
	}
	s.known.remember(items, res, e.now)
	return res
}

// throughCache reports whether a cacheable counter is read through
// client-side caching: a cached dimension of a campaign, or a counter read
// often enough, for as long as it stays hot. Most reads are neither
// sampled nor looked up (nothing is hot): no key is built.
func (s *Store) throughCache(it *counting.Item) bool {
	if it.Scope.Campaign != "" && slices.Contains(s.cached, it.Subject.Dim) {
		return true
	}
	if s.hot == nil {
		return false
	}
	sampled := s.hot.sample()
	if !sampled && s.hot.size() == 0 {
		return false
	}
	tag := Tagged("", it)
	if sampled {
		s.hot.observe(tag)
	}
	return s.hot.isHot(tag)
}

// send runs the cached and the direct commands of a read at once, one
// pipelined round trip per node each, and counts the cache's hits.
func (s *Store) send(ctx context.Context, cached []rueidis.CacheableTTL, direct rueidis.Commands) (cachedRes, directRes []rueidis.RedisResult) {
	switch {
	case len(cached) > 0 && len(direct) > 0:
		var wg sync.WaitGroup
		wg.Go(func() { cachedRes = s.rdb.DoMultiCache(ctx, cached...) })
		directRes = s.rdb.DoMulti(ctx, direct...)
		wg.Wait()
	case len(cached) > 0:
		cachedRes = s.rdb.DoMultiCache(ctx, cached...)
	case len(direct) > 0:
		directRes = s.rdb.DoMulti(ctx, direct...)
	}
	var hits, misses int
	for _, r := range cachedRes {
		if r.IsCacheHit() {
			hits++
		} else {
			misses++
		}
	}
	s.reach.Observe(errors.Join(firstErr(cachedRes), firstErr(directRes)))
	s.metrics.Cache(hits, misses)
	return cachedRes, directRes
}

// sameHours reports whether a and b are hour windows of one counter: one
// HGETALL serves both (a dimension's windows come in a row).
func sameHours(a, b *counting.Item) bool {
	return a.Spec.Kind == counting.Hours && b.Spec.Kind == counting.Hours && a.Scope == b.Scope && a.Subject == b.Subject
}

// firstErr is the first error of rs that is not a nil reply.
func firstErr(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return err
		}
	}
	return nil
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.rdb.Do(ctx, s.rdb.B().Ping().Build()).Error()
}

// FirstLine is err's message up to its first line break: Redis errors
// from scripts carry the script's text after it.
func FirstLine(err error) string { return firstLine(err) }

func firstLine(err error) string {
	msg := err.Error()
	for i := range len(msg) {
		if msg[i] == '\n' {
			return msg[:i]
		}
	}
	return msg
}

// ReadExact reads items from Redis within ctx, without the read deadline,
// the stall or last-known values: for a write's caller that needs what
// Redis holds right after it (a pace check taken back).
func (s *Store) ReadExact(ctx context.Context, items []counting.Item) []counting.Result {
	var p readPlan
	s.plan(&p, items, s.env(), nil)
	return s.read(ctx, items, &p, nil)
}

// HotKeys are the counters read most in the last second, and how many are
// hot now (read through client-side caching).
func (s *Store) HotKeys() []HotKey { return s.hot.list() }

// Hot is how many counters are hot now.
func (s *Store) Hot() int { return s.hot.size() }

// IsHot reports whether the counter of tag (Tagged) is hot now.
func (s *Store) IsHot(tag string) bool { return s.hot.isHot(tag) }

// Stalled reports whether Redis is in a stall: reads and the calls a
// caller waits on answer at once without asking it.
func (s *Store) Stalled() bool { return s.stall.Load() != 0 }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }
