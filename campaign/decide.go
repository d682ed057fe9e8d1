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
// candidate allowed, or the first of its caps, in declared order, whose
// count reached its limit. Every count all candidates need is read in one
// store read (within its deadline, failing open per candidate, last-known
// values when Redis is slow). decls holds each candidate's declaration;
// a candidate without one is allowed with code 10002.
func (v Counters) Decide(ctx context.Context, ids map[string]string, cands []counting.Candidate, decls map[string]*Declaration) []counting.Verdict {
	out := make([]counting.Verdict, len(cands))
	var qs []Query
	type ref struct{ cand, q int }
	var refs [][]ref // per candidate and cap: its query, -1 when nothing to count
	refs = make([][]ref, len(cands))
	for i, c := range cands {
		out[i] = counting.Verdict{CID: c.CID, Allowed: true}
		d := decls[c.CID]
		if d == nil {
			out[i].Code, out[i].Msg = apierr.KeyNotFound, "campaign "+c.CID+" is not known: nothing declared, allowed"
			continue
		}
		at := map[[2]string]int{} // event, dim -> query
		refs[i] = make([]ref, len(d.Caps))
		for k, cp := range d.Caps {
			id := ids[cp.Dim]
			if id == "" {
				refs[i][k] = ref{i, -1} // no such identity: nothing counted
				continue
			}
			key := [2]string{cp.Event, cp.Dim}
			q, ok := at[key]
			if !ok {
				q = len(qs)
				at[key] = q
				qs = append(qs, Query{CID: c.CID, Event: cp.Event, Dims: []Dim{{Name: cp.Dim, ID: id}}})
			}
			switch cp.Window.Unit {
			case UnitHours:
				if !slices.Contains(qs[q].Windows, cp.Window.N) {
					qs[q].Windows = append(qs[q].Windows, cp.Window.N)
					slices.Sort(qs[q].Windows)
				}
			case UnitMinutes, UnitSeconds:
				qs[q].PaceWindowSec = seconds(cp.Window)
			case UnitWeek:
				qs[q].Week = true
			case UnitMonth:
				qs[q].Month = true
			}
			refs[i][k] = ref{i, q}
		}
	}
	res := v.Read(ctx, qs)
	nowMs := v.Now().UnixMilli()
	for i := range cands {
		d := decls[cands[i].CID]
		for k, r := range refs[i] {
			if r.q < 0 {
				continue
			}
			judge(&out[i], &d.Caps[k], &qs[r.q], &res[r.q], nowMs)
		}
	}
	return out
}

// judge applies one cap to the counts read for it: a failed read degrades
// the verdict (allowed), a stale one marks it, a count at the limit
// blocks it (the first such cap is the one named).
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
	if !v.Allowed {
		return
	}
	c := &r.Counts[0]
	var count int64
	var reason string
	switch cp.Window.Unit {
	case UnitDay:
		count, reason = c.Day, ReasonDay
	case UnitWeek:
		count, reason = c.Week, ReasonWeek
	case UnitMonth:
		count, reason = c.Month, ReasonMonth
	case UnitHours:
		count, reason = c.Windows[slices.Index(q.Windows, cp.Window.N)], ReasonWindow
	default:
		count, reason = c.Pace.Count, ReasonPaceLimit
		if gap := int64(cp.Window.MinGapSec) * 1000; gap > 0 && c.Pace.LastAt > 0 && nowMs-c.Pace.LastAt < gap {
			v.Allowed, v.Cap, v.Reason, v.Count = false, cp, ReasonPaceGap, nowMs-c.Pace.LastAt
			return
		}
	}
	if count >= cp.Limit {
		v.Allowed, v.Cap, v.Reason, v.Count = false, cp, reason, count
	}
}

// How a cap blocks (counting.Verdict.Reason).
const (
	ReasonDay       = "day_cap"
	ReasonWeek      = "week_cap"
	ReasonMonth     = "month_cap"
	ReasonWindow    = "window_cap"
	ReasonPaceLimit = "pace_limit"
	ReasonPaceGap   = "pace_gap"
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
	out := v.Decide(ctx, req.Identities, req.Candidates, d.Decls)
	for i := range out {
		switch {
		case d.Unread[out[i].CID]:
			// Neither Redis nor a last-known copy: fail open.
			out[i] = counting.Verdict{CID: out[i].CID, Allowed: true, Degraded: true,
				Code: v.Code(d.Err), Msg: "declared caps unavailable: " + core.FirstLine(d.Err)}
		case d.AgeMs > 0:
			out[i].Stale, out[i].AgeMs = true, max(out[i].AgeMs, d.AgeMs)
		}
	}
	return out
}

// Declared are the declarations Declarations read: by cid (an unknown
// campaign is absent), Unread the cids neither Redis nor a last-known copy
// answered for (Err says why), AgeMs > 0 when some are last-known copies.
type Declared struct {
	Decls  map[string]*Declaration
	Unread map[string]bool
	AgeMs  int64
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
	hs, ageMs, err := v.Hashes(ctx, keys)
	out := Declared{Decls: make(map[string]*Declaration, len(cids)), AgeMs: ageMs, Err: err}
	for i, m := range hs {
		switch {
		case m == nil:
			if out.Unread == nil {
				out.Unread = map[string]bool{}
			}
			out.Unread[cids[i]] = true
		case len(m) > 0:
			if d, err := parsed.get(cids[i], m); err == nil {
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
	}
	return nil
}

// parsed are the declarations Declarations parsed, by cid, with the hash
// they came from: parsing a campaign's caps (JSON) is most of a decide's
// CPU, and a declaration changes seldom. Shared read-only by every
// decide; at most maxParsed are kept.
var parsed = &parsedDecls{m: map[string]parsedDecl{}}

const maxParsed = 1 << 16

type parsedDecls struct {
	mu sync.RWMutex
	m  map[string]parsedDecl
}

type parsedDecl struct {
	hash map[string]string
	d    *Declaration
}

// get answers cid's declaration parsed from m, parsing only when m
// differs from the hash it was last parsed from.
func (p *parsedDecls) get(cid string, m map[string]string) (*Declaration, error) {
	p.mu.RLock()
	e, ok := p.m[cid]
	p.mu.RUnlock()
	if ok && maps.Equal(e.hash, m) {
		return e.d, nil
	}
	d, err := Parse(cid, m)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if len(p.m) >= maxParsed {
		clear(p.m)
	}
	p.m[cid] = parsedDecl{hash: m, d: &d}
	p.mu.Unlock()
	return &d, nil
}
