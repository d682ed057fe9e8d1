package campaign

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// Decide answers one bid request from its candidates' declared caps: each
// candidate allowed, or blocked by the strictest of its caps whose count
// reached its limit (the one that blocks longest: block). Every count all candidates need is read in one
// store read (within its deadline, failing open per candidate, last-known
// values when Redis is slow). decls holds each candidate's declaration;
// a candidate without one is allowed with code 10002.
func (v Counters) Decide(ctx context.Context, ids map[string]string, cands []counting.Candidate, decls map[string]*Declaration) []counting.Verdict {
	return v.decide(ctx, &counting.DecideRequest{Identities: ids, Candidates: cands}, decls)
}

func (v Counters) decide(ctx context.Context, req *counting.DecideRequest, decls map[string]*Declaration) []counting.Verdict {
	ids, cands := req.Identities, req.Candidates
	out := make([]counting.Verdict, len(cands))
	// At most a query per cap: the queries are sized once (a Query is
	// large, and growing the slice copied them all).
	caps := 0
	for _, c := range cands {
		if d := decls[c.CID]; d != nil {
			caps += len(d.Caps)
		}
	}
	p := newPlan(ids, len(cands), caps)
	defer p.release()
	if req.Reserved {
		p.reserveEvent = v.Store.Limits().Events[0]
	}
	for i, c := range cands {
		out[i] = counting.Verdict{CID: c.CID, CRID: c.CRID, Allowed: true}
		d := decls[c.CID]
		switch {
		case d == nil:
			out[i].Code, out[i].Msg = apierr.KeyNotFound, "campaign "+c.CID+" is not known: nothing declared, allowed"
		case !d.identified(ids) && d.NoIdentity == NoBid:
			out[i].Allowed, out[i].Reason = false, ReasonNoIdentity
		default:
			p.refs[i] = p.add(c, d)
		}
	}
	res := v.Read(ctx, p.qs)
	nowMs := v.Now().UnixMilli()
	for i := range cands {
		d := decls[cands[i].CID]
		for k, q := range p.refs[i] {
			if q >= 0 {
				judge(&out[i], &d.Caps[k], &p.qs[q], &res[q], nowMs)
			}
		}
	}
	return out
}

// plan is the reads a decide makes: one query per counter its candidates'
// caps read, and for each candidate and cap the query it reads (-1 when
// the cap does not apply).
type plan struct {
	ids  map[string]string
	qs   []Query
	refs [][]int
	// A candidate's own counters (its campaign's and creative's) are found
	// among the queries it added (a campaign has a few caps), and among
	// those the first candidate of the same campaign added (byCID: their
	// first and last + 1; another creative of it). A parent's counter
	// (advertiser, io) is read once for all the candidates whose caps read
	// it (parents): their zone and exact window are one (checked when
	// declared). No key of every counter is hashed (at 150 counters, that
	// map was a sixth of a direct decide's CPU).
	byCID   map[string][2]int
	parents map[parentKey]int
	// refBuf and dims are where the candidates' refs and the queries' dims
	// are cut from: one allocation each for the decide.
	refBuf []int
	dims   []Dim
	// reserveEvent, when set, adds in-flight bids (held in its tag).
	reserveEvent string
	bufs         *planBufs
}

// parentKey is a parent's counter: level, its id, event, dimension.
type parentKey struct{ level, id, event, dim string }

// newPlan is the plan of a decide of n candidates whose declarations hold
// caps caps in all (at most a query each), in buffers of an earlier
// decide's when one was released (release).
func newPlan(ids map[string]string, n, caps int) plan {
	var p plan
	p.ids = ids
	b := planBuffers.Get().(*planBufs)
	if cap(b.qs) < caps || cap(b.refs) < n {
		b.qs, b.refBuf, b.dims, b.refs = make([]Query, 0, caps), make([]int, caps), make([]Dim, 0, caps), make([][]int, n)
	}
	p.bufs, p.qs, p.refBuf, p.dims, p.refs = b, b.qs[:0], b.refBuf[:caps], b.dims[:0], b.refs[:n]
	if n > 1 {
		if b.byCID == nil {
			b.byCID = make(map[string][2]int, n)
		}
		p.byCID = b.byCID
	}
	return p
}

// planBufs are a plan's buffers: its queries (a Query is large: a decide
// of 50 candidates' 150 caps took 35 KB of them, a quarter of what it
// allocated), their dims, the candidates' refs and byCID.
type planBufs struct {
	qs     []Query
	dims   []Dim
	refBuf []int
	refs   [][]int
	byCID  map[string][2]int
}

// planBuffers are released plans' buffers.
var planBuffers = sync.Pool{New: func() any { return new(planBufs) }}

// release gives p's buffers to the next plan: nothing may use p, its
// queries or its refs after. Buffers of a huge decide are left to the GC.
func (p *plan) release() {
	b := p.bufs
	if b == nil || cap(b.qs) > 4096 {
		return
	}
	// Cleared, so that a buffer keeps no ids (nor a query's windows) alive.
	clear(p.qs)
	clear(p.dims)
	clear(p.refs)
	clear(b.byCID)
	p.bufs = nil
	planBuffers.Put(b)
}

// add plans the reads of candidate c's caps: a cap applies when the
// request carries its dimension (of the identity types, only the one the
// campaign caps the request under) and, at the creative level, a creative.
func (p *plan) add(c counting.Candidate, d *Declaration) []int {
	n := len(d.Caps)
	if len(p.refBuf) < n {
		p.refBuf = make([]int, n)
	}
	refs := p.refBuf[:n:n]
	p.refBuf = p.refBuf[n:]
	ident := d.identity(p.ids)
	own := len(p.qs)
	before, again := p.byCID[c.CID]
	for k := range d.Caps {
		cp := &d.Caps[k]
		id, of := p.ids[cp.Dim], d.LevelID(cp.Level, c.CID, c.CRID)
		if id == "" || of == "" || cp.Dim != ident && slices.Contains(d.Identities, cp.Dim) {
			refs[k] = -1
			continue
		}
		var q int
		if cp.Level == LevelAdvertiser || cp.Level == LevelIO {
			key := parentKey{cp.Level, of, cp.Event, cp.Dim}
			var ok bool
			if q, ok = p.parents[key]; !ok {
				if p.parents == nil {
					p.parents = map[parentKey]int{}
				}
				q = p.query(cp, d, of, id)
				p.parents[key] = q
			}
		} else if q = p.find(own, len(p.qs), cp, of); q < 0 {
			if again {
				q = p.find(before[0], before[1], cp, of)
			}
			if q < 0 {
				q = p.query(cp, d, of, id)
			}
		}
		p.qs[q].reads(cp, d)
		refs[k] = q
	}
	if !again && p.byCID != nil {
		p.byCID[c.CID] = [2]int{own, len(p.qs)}
	}
	return refs
}

// find is the query among qs[from:to] of the counter that cap cp (of a
// campaign or a creative: no parent's) reads at of, or -1.
func (p *plan) find(from, to int, cp *Cap, of string) int {
	level := levelOf(cp.Level)
	for q := from; q < to; q++ {
		if x := &p.qs[q]; x.CID == of && x.Level == level && x.Event == cp.Event && x.Dims[0].Name == cp.Dim {
			return q
		}
	}
	return -1
}

// query adds the read of the counter cap cp reads at of, on the request's
// id of its dimension, and answers its index.
func (p *plan) query(cp *Cap, d *Declaration, of, id string) int {
	p.dims = append(p.dims, Dim{Name: cp.Dim, ID: id})
	n := len(p.dims)
	p.qs = append(p.qs, Query{CID: of, Level: levelOf(cp.Level), Event: cp.Event, Zone: d.Timezone, Dims: p.dims[n-1 : n : n],
		Reserved: p.reserveEvent != "", ReserveEvent: p.reserveEvent})
	return len(p.qs) - 1
}

// identity is the identity type a request is capped under: the first of
// the campaign's identities it carries ("" when none, or when the
// campaign names none).
func (d *Declaration) identity(ids map[string]string) string {
	for _, t := range d.Identities {
		if ids[t] != "" {
			return t
		}
	}
	return ""
}

// identified reports whether a request carries one of the campaign's
// identities (always, for a campaign that names none).
func (d *Declaration) identified(ids map[string]string) bool {
	return len(d.Identities) == 0 || d.identity(ids) != ""
}

// reads adds what cap cp reads to q, a read of its counter.
func (q *Query) reads(cp *Cap, d *Declaration) {
	switch u := cp.Window.Unit; {
	case PeriodKind(u) != "" && cp.Window.N > 1:
		if p := (counting.Period{Unit: u, N: cp.Window.N}); !slices.Contains(q.Periods, p) {
			q.Periods = append(q.Periods, p)
		}
	case u == UnitHours:
		if !slices.Contains(q.Windows, cp.Window.N) {
			q.Windows = append(q.Windows, cp.Window.N)
			slices.Sort(q.Windows)
		}
	case u == UnitMinutes, u == UnitSeconds:
		q.PaceWindowSec = seconds(cp.Window)
	case u == UnitWeek:
		q.Week = true
	case u == UnitMonth:
		q.Month = true
	case u == UnitLifetime:
		q.LifetimeEnd, _ = d.EndUnix()
	}
}

// levelOf is a cap's level as a query's: "" for the campaign's own.
func levelOf(level string) string {
	if level == LevelCampaign {
		return ""
	}
	return level
}

// judge applies one cap to the counts read for it: a failed read degrades
// the verdict (allowed), a stale one marks it, a count at the limit
// blocks it (the strictest such cap is the one named).
func judge(v *counting.Verdict, cp *Cap, q *Query, r *Result, nowMs int64) {
	if r.Err != nil {
		if !v.Degraded {
			v.Degraded, v.Code, v.Msg = true, ReadCode(r.Err), r.Err.Error()
		}
		return
	}
	if r.Stale {
		v.Stale, v.AgeMs = true, max(v.AgeMs, r.AgeMs)
	}
	c := &r.Counts[0]
	var count int64
	var reason string
	switch u := cp.Window.Unit; {
	case PeriodKind(u) != "" && cp.Window.N > 1:
		count, reason = c.Periods[slices.Index(q.Periods, counting.Period{Unit: u, N: cp.Window.N})], periodReasons[u]
	case u == UnitDay:
		count, reason = c.Day, ReasonDay
	case u == UnitWeek:
		count, reason = c.Week, ReasonWeek
	case u == UnitMonth:
		count, reason = c.Month, ReasonMonth
	case u == UnitLifetime:
		count, reason = c.Lifetime, ReasonLifetime
	case u == UnitHours:
		count, reason = c.Windows[slices.Index(q.Windows, cp.Window.N)], ReasonWindow
	default:
		count, reason = c.Pace.Count, ReasonPaceLimit
		if gap := int64(cp.Window.MinGapSec) * 1000; gap > 0 && c.Pace.LastAt > 0 && nowMs-c.Pace.LastAt < gap {
			block(v, cp, ReasonPaceGap, nowMs-c.Pace.LastAt, int64(cp.Window.MinGapSec))
			return
		}
	}
	if c.Reserved > 0 && cp.Then != ThenBlock {
		// In-flight bids count toward every frequency cap of the counter:
		// each may still become an event.
		count += c.Reserved
		v.Reserved = max(v.Reserved, c.Reserved)
	}
	if count >= cp.Limit {
		if cp.Then == ThenBlock {
			reason = ReasonSuppressed
		}
		block(v, cp, reason, count, span(cp.Window))
	}
}

// block records that cp blocks the verdict, unless a stricter cap already
// does: a suppression before a frequency cap, then the one that blocks
// longest, the one with the longest window (for a minimum gap, the gap),
// the first declared of equals.
func block(v *counting.Verdict, cp *Cap, reason string, count, spanSec int64) {
	if !v.Allowed && v.Cap != nil {
		was, is := v.Cap.Then == ThenBlock, cp.Then == ThenBlock
		if was && !is || was == is && spanSec <= blocks(v) {
			return
		}
	}
	v.Allowed, v.Cap, v.Reason, v.Count = false, cp, reason, count
}

// blocks is how long the cap that blocks v may block, in seconds.
func blocks(v *counting.Verdict) int64 {
	if v.Reason == ReasonPaceGap {
		return int64(v.Cap.Window.MinGapSec)
	}
	return span(v.Cap.Window)
}

// periodReasons are the reasons of caps of several periods, by unit.
var periodReasons = map[string]string{UnitDay: ReasonDay, UnitWeek: ReasonWeek, UnitMonth: ReasonMonth}

// How a cap blocks (counting.Verdict.Reason).
const (
	ReasonDay      = "day_cap"
	ReasonWeek     = "week_cap"
	ReasonMonth    = "month_cap"
	ReasonLifetime = "lifetime_cap"
	// ReasonNoIdentity blocks a request that carries none of a campaign's
	// identities, when the campaign says nobid.
	ReasonNoIdentity = "no_identity"
	// ReasonSuppressed is a suppression's (Cap.Then "block").
	ReasonSuppressed = "suppressed"
	ReasonWindow     = "window_cap"
	ReasonPaceLimit  = "pace_limit"
	ReasonPaceGap    = "pace_gap"
)

// Answer decides one bid request within timeout: the candidates'
// declarations, then Decide. While Redis does not answer, a candidate decides
// on its last-known declaration (Stale), or is allowed, Degraded, when
// there is none.
func (v Counters) Answer(ctx context.Context, req *counting.DecideRequest, timeout time.Duration) []counting.Verdict {
	cids := make([]string, len(req.Candidates))
	for i, cand := range req.Candidates {
		cids[i] = cand.CID
	}
	// One deadline for both reads: the declarations' time is the counts'.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := v.Declarations(ctx, cids)
	out := v.decide(ctx, req, d.Decls)
	for i := range out {
		switch {
		case d.Unread[out[i].CID]:
			// Neither Redis nor a last-known copy: fail open.
			out[i] = counting.Verdict{CID: out[i].CID, Allowed: true, Degraded: true,
				Code: v.Code(d.Err), Msg: "declared caps unavailable: " + core.FirstLine(d.Err)}
		case d.Ages[out[i].CID] > 0:
			// Its declaration is a last-known copy (another's being one
			// says nothing of this one).
			out[i].Stale, out[i].AgeMs = true, max(out[i].AgeMs, d.Ages[out[i].CID])
		}
	}
	return out
}

// Declared are the declarations Declarations read: by cid (an unknown
// campaign is absent), Unread the cids neither Redis nor a last-known copy
// answered for (Err says why), Ages the age (ms) of those that are
// last-known copies, by cid.
type Declared struct {
	Decls  map[string]*Declaration
	Unread map[string]bool
	Ages   map[string]int64
	Err    error
}

// Declarations reads the declarations of cids (client-side cached: an
// edit reaches every reader at once; while Redis does not answer, the
// last-known ones); a hash that does not parse counts as no declaration.
func (v Counters) Declarations(ctx context.Context, cids []string) Declared {
	keys := make([]string, len(cids))
	for i, cid := range cids {
		keys[i] = Key(cid)
	}
	hs, ages, err := v.Hashes(ctx, keys)
	out := Declared{Decls: make(map[string]*Declaration, len(cids)), Err: err}
	for i, m := range hs {
		if ages != nil && ages[i] > 0 {
			if out.Ages == nil {
				out.Ages = map[string]int64{}
			}
			out.Ages[cids[i]] = ages[i]
		}
		switch {
		case m == nil:
			if out.Unread == nil {
				out.Unread = map[string]bool{}
			}
			out.Unread[cids[i]] = true
		case len(m) > 0:
			if d, err := ParseCached(cids[i], m); err == nil {
				out.Decls[cids[i]] = d
			}
		}
	}
	return out
}

// CheckDecide validates a decide request against the parser's dimensions:
// known dimensions with valid ids, 1 to most candidates with valid cids.
func (p *Parser) CheckDecide(req *counting.DecideRequest, most int) error {
	if n := len(req.Candidates); n < 1 || n > most {
		return apierr.Invalid("candidates must hold 1 to %d candidates, got %d", most, n)
	}
	for dim, id := range req.Identities {
		if !slices.Contains(p.dims, dim) {
			return apierr.Invalid("identities: unknown dimension %q (dimensions: %v)", dim, p.dims)
		}
		if !ids.ValidID(id) {
			return apierr.Invalid("identities.%s must be %s", dim, ids.IDRule)
		}
	}
	for i, c := range req.Candidates {
		if !ids.ValidCID(c.CID) {
			return apierr.Invalid("candidates[%d].cid must be %s", i, ids.CIDRule)
		}
		if c.CRID != "" && !ids.ValidCID(c.CRID) {
			return apierr.Invalid("candidates[%d].crid must be %s", i, ids.CIDRule)
		}
	}
	return nil
}

// parsed are the declarations Declarations parsed, by cid, with the hash
// they came from: parsing a campaign's caps (JSON) is most of a decide's
// CPU, and a declaration changes seldom. Shared read-only by every decide.
var parsed = NewHashCache[*Declaration](1 << 16)

// ParseCached is Parse through the cache of parsed declarations: a hash
// parsed before (the same fields and values) is not parsed again. The
// declaration is shared: read it, never change it.
func ParseCached(cid string, m map[string]string) (*Declaration, error) {
	return parsed.Get(cid, m, func(m map[string]string) (*Declaration, error) {
		d, err := Parse(cid, m)
		return &d, err
	})
}

// HashCache keeps what was parsed from Redis hashes, by key, with the hash
// each came from: a hash read through client-side caching is parsed again
// only when it changed. At most max are kept.
type HashCache[T any] struct {
	mu  sync.RWMutex
	m   map[string]hashEntry[T]
	max int
}

type hashEntry[T any] struct {
	hash map[string]string
	v    T
}

// NewHashCache returns an empty cache of at most max entries.
func NewHashCache[T any](max int) *HashCache[T] {
	return &HashCache[T]{m: map[string]hashEntry[T]{}, max: max}
}

// Get answers what parse makes of key's hash m, parsing only when m
// differs from the hash it was last parsed from; a parse error is not
// kept.
func (c *HashCache[T]) Get(key string, m map[string]string, parse func(map[string]string) (T, error)) (T, error) {
	c.mu.RLock()
	e, ok := c.m[key]
	c.mu.RUnlock()
	if ok && core.SameHash(e.hash, m) {
		return e.v, nil
	}
	if ok && maps.Equal(e.hash, m) {
		// The same fields in another map (one read before the client-side
		// cache held it): keep this one, which the next reads share.
		c.mu.Lock()
		c.m[key] = hashEntry[T]{hash: m, v: e.v}
		c.mu.Unlock()
		return e.v, nil
	}
	v, err := parse(m)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[key] = hashEntry[T]{hash: m, v: v}
	c.mu.Unlock()
	return v, nil
}
