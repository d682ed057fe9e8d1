// Package campaign is the campaign counters over the counting core: a
// campaign's event counted for each dimension of a notice (the natural
// day, the hour windows, an exact pace window), the queries of /v1/incr,
// /v1/freq, /v1/freq/batch and /v1/pace turned into core items and back.
// The counter serves them over HTTP; the client's direct mode reads them
// in-process.
package campaign

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// Query is one request of a campaign endpoint: a campaign's event and one id
// per dimension, with the windows asked for.
type Query struct {
	CID   string
	Event string
	// Level is whose id CID is: "" for the campaign's own counters, else
	// an advertiser, io or creative (counting.Scope.Level).
	Level string
	Dims  []Dim
	// Windows are the hour windows asked for, ascending; a write takes at
	// most one.
	Windows []int
	// PaceWindowSec > 0 records writes in that exact window too, and makes
	// reads return its count and newest event.
	PaceWindowSec int
	// Week and Month count (and read) the natural week and month too.
	Week, Month bool
	// Zone is the IANA zone of the natural day, week and month (the
	// store's when empty).
	Zone string
	// LifetimeEnd > 0 counts (and reads) the lifetime too, until then
	// (unix seconds).
	LifetimeEnd int64
	// Periods count (and read) natural periods and the n-1 before; a
	// write keeps n of each.
	Periods []counting.Period
	// Reserved reads the in-flight bids too (Counts.Reserved), held in
	// the tag of ReserveEvent.
	Reserved bool
	// Release makes a write (of ReserveEvent, a win) end the in-flight
	// bid EID on its counters, in the same run as its count; Lost makes
	// it only that (a loss notice), counting nothing.
	Release, Lost bool
	// ReserveEvent is the event whose tag holds in-flight bids: the
	// counter's first (win).
	ReserveEvent string
	// Quiet makes a write answer its code and whether it was a duplicate
	// only: no counts are computed (callback's forwarding reads no more).
	Quiet bool
	// EID is the event id of a write.
	EID string
	// Also are the other levels a write counts at (counting.LevelCount),
	// with the same event and event id.
	Also []Query
}

// Dim is one dimension of a query and the id counted in it.
type Dim struct {
	Name string
	ID   string
}

// Counts are one dimension's values: today's count, the sum of each window
// asked for (in Query.Windows order), and the exact window's state.
type Counts struct {
	Day         int64
	Windows     []int64
	Pace        counting.Pace
	Week, Month int64
	Lifetime    int64
	Periods     []int64 // in Query.Periods order
	Reserved    int64   // in-flight bids, when Query.Reserved
}

// Result is the answer for one Query. Counts line up with Query.Dims. Err is
// set when a read could not be served; Counts are then zero.
type Result struct {
	Counts    []Counts
	Duplicate bool
	Err       error
	// Stale is set when some counts are last-known values (Redis did not
	// answer in time); AgeMs is the age of the oldest.
	Stale bool
	AgeMs int64
}

// Counters serve the campaign queries on a core store.
type Counters struct {
	*core.Store
	M core.Metrics
}

// ref says which dimension and which counter of a query an item is.
type ref struct {
	q, d int
	part part
	w    int // window index, for partWindow
}

type part uint8

const (
	partDay part = iota
	partWindow
	partPace
	partWeek
	partMonth
	partLifetime
	partPeriod
	partReserved
	partRelease
)

// items turns queries into items; refs say where each item's answer goes.
func (q *Query) items(its []counting.Item, refs []ref, qi int, write bool) ([]counting.Item, []ref) {
	scope := counting.Scope{Campaign: q.CID, Event: q.Event, Level: q.Level}
	held := counting.Scope{Campaign: q.CID, Event: q.ReserveEvent, Level: q.Level} // in-flight bids
	for d, dim := range q.Dims {
		subj := counting.Subject{Dim: dim.Name, ID: dim.ID}
		add := func(spec counting.Spec, p part, w int) {
			it := counting.Item{Scope: scope, Subject: subj, Spec: spec}
			if p == partReserved || p == partRelease {
				it.Scope = held
			}
			if write {
				it.Hits, it.EventID, it.Quiet = 1, q.EID, q.Quiet
			}
			its = append(its, it)
			refs = append(refs, ref{qi, d, p, w})
		}
		if write && (q.Release || q.Lost) {
			add(counting.Spec{Kind: counting.Release}, partRelease, 0)
		}
		if q.Lost {
			continue
		}
		if !write && q.Reserved {
			add(counting.Spec{Kind: counting.Reserve}, partReserved, 0)
		}
		add(counting.Spec{Kind: counting.Day, Span: 1, Zone: q.Zone}, partDay, 0)
		for w, hours := range q.Windows {
			add(counting.Spec{Kind: counting.Hours, Span: int64(hours)}, partWindow, w)
		}
		if q.PaceWindowSec > 0 {
			add(counting.Spec{Kind: counting.Sliding, Span: int64(q.PaceWindowSec)}, partPace, 0)
		}
		if q.Week {
			add(counting.Spec{Kind: counting.Week, Span: 1, Zone: q.Zone}, partWeek, 0)
		}
		if q.Month {
			add(counting.Spec{Kind: counting.Month, Span: 1, Zone: q.Zone}, partMonth, 0)
		}
		if q.LifetimeEnd > 0 {
			add(counting.Spec{Kind: counting.Lifetime, Span: q.LifetimeEnd}, partLifetime, 0)
		}
		for p, pr := range q.Periods {
			add(counting.Spec{Kind: PeriodKind(pr.Unit), Span: int64(pr.N), Keep: int64(pr.N), Zone: q.Zone}, partPeriod, p)
		}
	}
	return its, refs
}

// PeriodKind is the core kind of a unit of counting.Period, "" for a unit
// that has none. (A switch: a decide asks it of every cap, twice.)
func PeriodKind(unit string) counting.Kind {
	switch unit {
	case UnitDay:
		return counting.Days
	case UnitWeek:
		return counting.Weeks
	case UnitMonth:
		return counting.Months
	}
	return ""
}

// newResults makes zero results shaped after their queries.
// oneResult holds the result of one query of at most smallDims dimensions
// and smallVals windows and periods in all.
type oneResult struct {
	res    [1]Result
	counts [smallDims]Counts
	vals   [smallVals]int64
}

const smallDims, smallVals = 4, 16

func newResults(qs []Query) []Result {
	// Three allocations whatever the batch (one for a small query): the
	// results, every query's counts, and every count's windows and
	// periods, each a capped slice of one.
	nc, nv := 0, 0
	for i := range qs {
		nc += len(qs[i].Dims)
		nv += len(qs[i].Dims) * (len(qs[i].Windows) + len(qs[i].Periods))
	}
	var res []Result
	var counts []Counts
	var vals []int64
	if len(qs) == 1 && nc <= smallDims && nv <= smallVals {
		// One query of a few counts (a bidder's GET): one allocation.
		one := new(oneResult)
		res, counts, vals = one.res[:], one.counts[:nc], one.vals[:nv]
	} else {
		res, counts, vals = make([]Result, len(qs)), make([]Counts, nc), make([]int64, nv)
	}
	for i := range qs {
		d, n, np := len(qs[i].Dims), len(qs[i].Windows), len(qs[i].Periods)
		res[i].Counts, counts = counts[:d:d], counts[d:]
		for j := range res[i].Counts {
			if n > 0 {
				res[i].Counts[j].Windows, vals = vals[:n:n], vals[n:]
			}
			if np > 0 {
				res[i].Counts[j].Periods, vals = vals[:np:np], vals[np:]
			}
		}
	}
	return res
}

// fill stores one item's result in its query's result.
func fill(res []Result, r ref, got *counting.Result) {
	c := &res[r.q].Counts[r.d]
	switch r.part {
	case partDay:
		c.Day = got.Count
	case partWindow:
		c.Windows[r.w] = got.Count
	case partPace:
		c.Pace = counting.Pace{Count: got.Count, LastAt: got.LastAt}
	case partWeek:
		c.Week = got.Count
	case partMonth:
		c.Month = got.Count
	case partLifetime:
		c.Lifetime = got.Count
	case partPeriod:
		c.Periods[r.w] = got.Count
	case partReserved:
		c.Reserved = got.Count
	}
}

// Incr counts one event for every dimension of q: the day, the hour window
// when one is given, the exact window when PaceWindowSec is.
func (v Counters) Incr(ctx context.Context, q *Query) (Result, error) {
	if q.PaceWindowSec > 0 && q.EID == "" {
		// One member for every dimension's window, as with an eid.
		q.EID = ids.Random("r-")
	}
	its, refs := q.items(make([]counting.Item, 0, q.size()), make([]ref, 0, q.size()), 0, true)
	got := v.Write(ctx, its)
	res := newResults([]Query{*q})
	res[0].Duplicate = true
	for k, r := range refs {
		if got[k].Code != apierr.OK {
			return Result{}, &apierr.Error{Code: got[k].Code, Msg: got[k].Msg}
		}
		fill(res, r, &got[k])
		// A duplicate is a write that counted nothing new: every counter
		// had seen the eid. Each counter is idempotent on its own, so two
		// deliveries racing each other still count once per counter.
		res[0].Duplicate = res[0].Duplicate && got[k].Duplicate
	}
	return res[0], nil
}

// IncrBatch counts every query as Incr does, all in one store write (one
// pipelined round trip per Redis node); each query gets its result or its
// own error.
func (v Counters) IncrBatch(ctx context.Context, qs []Query) ([]Result, []error) {
	all, owner := withLevels(qs)
	var refBuf [16]ref
	its, refs := queryItems(all, true, refBuf[:0], nil)
	got := v.Write(ctx, its)
	res := newResults(all)
	errs := make([]error, len(qs))
	for i := range qs {
		res[i].Duplicate = true
	}
	for k, r := range refs {
		o := owner[r.q]
		if got[k].Code != apierr.OK {
			errs[o] = &apierr.Error{Code: got[k].Code, Msg: got[k].Msg}
			continue
		}
		fill(res, r, &got[k])
		// Counted anew at any level: not a duplicate.
		res[o].Duplicate = res[o].Duplicate && got[k].Duplicate
	}
	return res[:len(qs)], errs
}

// withLevels are qs followed by the other levels each counts at (Also,
// with its event id), and for each the index of the query it belongs to.
// A query that records an exact window without an event id gets one, so
// every dimension and level records the same member.
func withLevels(qs []Query) ([]Query, []int) {
	all, owner := append(make([]Query, 0, 2*len(qs)), qs...), make([]int, len(qs), 2*len(qs))
	for i := range qs {
		if qs[i].EID == "" && (qs[i].PaceWindowSec > 0 || len(qs[i].Also) > 0) {
			qs[i].EID = ids.Random("r-")
			all[i].EID = qs[i].EID
		}
		owner[i] = i
	}
	for i := range qs {
		for _, a := range qs[i].Also {
			a.Event, a.EID, a.Release, a.ReserveEvent = qs[i].Event, qs[i].EID, qs[i].Release, qs[i].ReserveEvent
			a.Lost, a.Quiet = a.Lost || qs[i].Lost, qs[i].Quiet
			all = append(all, a)
			owner = append(owner, i)
		}
	}
	return all, owner
}

// size is how many items q becomes.
func (q *Query) size() int {
	n := 1 + len(q.Windows) + len(q.Periods)
	for _, on := range []bool{q.PaceWindowSec > 0, q.Week, q.Month, q.LifetimeEnd > 0, q.Reserved, q.Release || q.Lost} {
		if on {
			n++
		}
	}
	return n * len(q.Dims)
}

// Items are the core items qs are made of, writes of one hit or reads, in
// the order the store answers them.
func Items(qs []Query, write bool) ([]counting.Item, int) {
	its, _ := queryItems(qs, write, nil, nil)
	return its, len(its)
}

// queryItems turns every query into its items (writes of one hit, or reads),
// in its (a caller's buffer, nil for a new one), with each item's place in
// the results, appended to refs (a caller's buffer on its stack: the refs
// live only as long as the call).
func queryItems(qs []Query, write bool, refs []ref, its []counting.Item) ([]counting.Item, []ref) {
	n := 0
	for i := range qs {
		n += qs[i].size()
	}
	its, refs = slices.Grow(its[:0], n), slices.Grow(refs[:0], n)
	for i := range qs {
		its, refs = qs[i].items(its, refs, i, write)
	}
	return its, refs
}

// readBufs are a read's items, their places and the store's results,
// kept for the next read (readBuffers): a decide of 50 candidates reads
// 150 counts, 38 KB of items and 23 KB of results.
type readBufs struct {
	items []counting.Item
	refs  []ref
	got   []counting.Result
}

var readBuffers = sync.Pool{New: func() any { return new(readBufs) }}

// Read answers every query in one store read.
func (v Counters) Read(ctx context.Context, qs []Query) []Result {
	b := readBuffers.Get().(*readBufs)
	its, refs := queryItems(qs, false, b.refs, b.items)
	if cap(b.got) < len(its) {
		b.got = make([]counting.Result, len(its))
	}
	got, held := v.Store.ReadInto(ctx, its, b.got[:len(its)])
	defer func() {
		// Unless a reader still holds them (the read ran out of time),
		// the buffers go to the next read, cleared of their strings.
		if !held && cap(its) <= 4096 {
			clear(its)
			clear(b.got[:len(its)])
			b.items, b.refs = its[:0], refs[:0]
			readBuffers.Put(b)
		}
	}()
	res := newResults(qs)
	for k, r := range refs {
		if res[r.q].Err != nil {
			continue
		}
		switch got[k].Code {
		case apierr.OK, apierr.KeyNotFound:
			fill(res, r, &got[k])
			if got[k].Stale {
				res[r.q].Stale, res[r.q].AgeMs = true, max(res[r.q].AgeMs, got[k].AgeMs)
			}
		default:
			// One counter of a query failed: the whole query reads as
			// failed, with zero counts.
			res[r.q] = newResults(qs[r.q : r.q+1])[0]
			res[r.q].Err = &apierr.Error{Code: got[k].Code, Msg: got[k].Msg}
		}
	}
	return res
}

// PaceRule is an exact sliding window cap: at most Limit events in the last
// Window, and none closer than MinGap to the previous one.
type PaceRule struct {
	Window time.Duration
	Limit  int
	MinGap time.Duration
}

// PaceResult is the outcome of a pace check for every dimension of a query.
type PaceResult struct {
	Result    int // PaceAllowed, PaceOverLimit or PaceTooSoon: the first refusal in dimension order
	Dims      []PaceDim
	Duplicate bool
}

// PaceDim is one dimension's outcome.
type PaceDim struct {
	Result int
	counting.Pace
}

// Pace checks and records one event in the exact sliding window of every
// dimension of q. It is all-or-nothing: when any dimension refuses, the
// event is taken back from the dimensions that recorded it.
func (v Counters) Pace(ctx context.Context, q *Query, rule PaceRule) (PaceResult, error) {
	eid := q.EID
	if eid == "" {
		eid = ids.Random("r-")
	}
	its := make([]counting.Item, len(q.Dims))
	for i, d := range q.Dims {
		its[i] = counting.Item{
			Scope:   counting.Scope{Campaign: q.CID, Event: q.Event},
			Subject: counting.Subject{Dim: d.Name, ID: d.ID},
			Spec: counting.Spec{Kind: counting.Sliding, Span: int64(rule.Window / time.Second),
				Limit: int64(rule.Limit), MinGapSec: int64(rule.MinGap / time.Second)},
			Hits: 1, EventID: eid,
		}
	}
	got := v.Write(ctx, its)
	res := PaceResult{Result: counting.PaceAllowed, Dims: make([]PaceDim, len(its))}
	var err error
	for i, g := range got {
		if g.Code != apierr.OK {
			err = &apierr.Error{Code: g.Code, Msg: g.Msg}
			continue
		}
		res.Dims[i] = PaceDim{Result: paceCode(&g), Pace: counting.Pace{Count: g.Count, LastAt: g.LastAt}}
	}
	refused := slices.IndexFunc(got, func(g counting.Result) bool { return g.Code == apierr.OK && !g.Allowed })
	if err != nil || refused >= 0 {
		err = errors.Join(err, v.takeBack(ctx, its, got, &res, err == nil))
	}
	if err != nil {
		v.M.RedisError("pace")
		code := apierr.CodeOf(err)
		if code == apierr.Internal {
			code = v.Code(err) // Redis's own error, not one of ours
		}
		return PaceResult{}, &apierr.Error{Code: code, Msg: "redis unavailable, retry: " + core.FirstLine(err)}
	}
	if refused >= 0 {
		res.Result = res.Dims[refused].Result
	}
	res.Duplicate = !slices.ContainsFunc(got, func(g counting.Result) bool { return !g.Duplicate })
	return res, nil
}

// takeBack takes back what a refused or failed pace call recorded (not
// replays of an earlier one), so it leaves nothing behind, and, when
// reread is set, answers the windows as they are then.
func (v Counters) takeBack(ctx context.Context, its []counting.Item, got []counting.Result, res *PaceResult, reread bool) error {
	var err error
	var undone []int
	for i, g := range got {
		if g.Code != apierr.OK || !g.Allowed || g.Duplicate {
			continue
		}
		if uerr := v.Undo(ctx, &its[i], g.LastAt); uerr != nil {
			err = errors.Join(err, uerr)
		}
		undone = append(undone, i)
	}
	if err != nil || !reread || len(undone) == 0 {
		return err
	}
	reads := make([]counting.Item, len(undone))
	for k, i := range undone {
		reads[k] = its[i]
		reads[k].Hits, reads[k].EventID = 0, ""
	}
	for k, r := range v.ReadExact(ctx, reads) {
		if r.Code != apierr.OK {
			err = errors.Join(err, &apierr.Error{Code: r.Code, Msg: r.Msg})
		}
		res.Dims[undone[k]].Pace = counting.Pace{Count: r.Count, LastAt: r.LastAt}
	}
	return err
}

func paceCode(g *counting.Result) int {
	switch g.Reason {
	case counting.OverLimit:
		return counting.PaceOverLimit
	case counting.TooSoon:
		return counting.PaceTooSoon
	}
	return counting.PaceAllowed
}

// AnswerOf is a read query's answer on the wire (counting.Answer).
func AnswerOf(q *Query, r *Result) counting.Answer {
	a := counting.Answer{CID: q.CID, Level: q.Level, Event: q.Event, WindowHours: q.Windows, PaceWindowSec: q.PaceWindowSec,
		Counts: make(map[string]counting.Counts, len(q.Dims))}
	if a.WindowHours == nil {
		a.WindowHours = []int{}
	}
	if r.Err != nil {
		a.Code, a.Msg, a.Degraded = ReadCode(r.Err), core.FirstLine(r.Err), true
	} else if r.Stale {
		a.Stale, a.AgeMs = true, r.AgeMs
	}
	for d, dim := range q.Dims {
		c := &r.Counts[d]
		out := counting.Counts{Day: c.Day}
		if len(q.Windows) > 0 {
			out.Windows = make(map[string]int64, len(q.Windows))
			for w, hours := range q.Windows {
				out.Windows[strconv.Itoa(hours)] = c.Windows[w]
			}
		}
		if q.PaceWindowSec > 0 {
			p := c.Pace
			out.Pace = &p
		}
		if q.Week {
			out.Week = &c.Week
		}
		if q.Month {
			out.Month = &c.Month
		}
		if q.LifetimeEnd > 0 {
			out.Lifetime = &c.Lifetime
		}
		if len(q.Periods) > 0 {
			out.Periods = make(map[string]int64, len(q.Periods))
			for p, pr := range q.Periods {
				out.Periods[pr.Name()] = c.Periods[p]
			}
		}
		a.Counts[dim.Name] = out
	}
	return a
}

// ReadCode is the code of a read that failed: the core's (10001 when
// Redis was too slow, 10004 when it was unreachable, 10005 when it
// refused the read itself).
func ReadCode(err error) int { return apierr.CodeOf(err) }
