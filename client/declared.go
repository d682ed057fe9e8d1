package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// DeclaredCap is a cap a campaign declares in callback's admin API
// (level, event, identity, window, limit).
type DeclaredCap = counting.Cap

// DecideIDs is Decide for campaigns that declare their caps: the bidder
// names the candidate campaigns, and the counter (or, in direct mode,
// this process) reads their declared caps and counts. A candidate blocked
// by a declared cap carries it in Decision.Declared, with the Reason,
// Dim, Count and Limit Decide would give; a campaign that declares
// nothing is allowed, Unknown. The decisions are always usable; the
// error says why some are degraded (nil when none is).
func (c *Client) DecideIDs(ctx context.Context, ids Identities, cids []string) ([]Decision, error) {
	cands := make([]Creative, len(cids))
	for i, cid := range cids {
		cands[i].CID = cid
	}
	return c.DecideCreatives(ctx, ids, cands)
}

// Creative is a candidate by id: its campaign, and the creative the bid
// would serve (CRID, optional), to which the campaign's creative caps apply.
type Creative = counting.Candidate

// DecideCreatives is DecideIDs for candidates that name their creative:
// the campaign's caps at every level apply (advertiser and io caps
// shared with the other campaigns of its parents), its creative caps to
// the candidate's creative.
func (c *Client) DecideCreatives(ctx context.Context, ids Identities, cands []Creative) ([]Decision, error) {
	out := make([]Decision, len(cands))
	req := counting.DecideRequest{Identities: ids, Candidates: cands, Reserved: c.reserved}
	for i, cand := range cands {
		out[i] = Decision{CID: cand.CID, CRID: cand.CRID, Allowed: true}
	}
	if len(cands) == 0 {
		return out, nil
	}
	degradeAll := func() {
		for i := range out {
			c.degrade(&out[i])
		}
	}
	if !c.limiter.Allow() {
		degradeAll()
		return out, ErrRateLimited
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	verdicts, err := splitCall(req.Candidates, c.maxBatch, func(part []counting.Candidate) ([]counting.Verdict, error) {
		return c.decide(ctx, &counting.DecideRequest{Identities: ids, Candidates: part, Reserved: c.reserved})
	})
	if err != nil {
		degradeAll()
		return out, err
	}
	var degraded int
	for i, v := range verdicts {
		d := &out[i]
		if v.Degraded {
			degraded++
			c.degrade(d)
			continue
		}
		d.Unknown = v.Code == apierr.KeyNotFound
		d.Stale, d.StaleMs, d.Reserved = v.Stale, v.AgeMs, v.Reserved
		if !v.Allowed && v.Cap == nil { // a request without any of the campaign's identities
			d.Allowed, d.Reason = false, Reason(v.Reason)
		}
		if v.Allowed || v.Cap == nil {
			continue
		}
		cp := *v.Cap // the caller's own copy: direct mode shares parsed declarations
		d.Allowed, d.Declared, d.Reason, d.Dim, d.Count, d.Limit = false, &cp, Reason(v.Reason), cp.Dim, v.Count, cp.Limit
		switch d.Reason {
		case WindowCap:
			d.Hours = v.Cap.Window.N
		case PaceGap:
			d.Limit = int64(v.Cap.Window.MinGapSec) * 1000
		}
	}
	if degraded > 0 {
		return out, fmt.Errorf("freqcap client: %d of %d candidates degraded", degraded, len(cands))
	}
	return out, nil
}

// splitCall calls call on parts of at most most items, all at once, and
// joins their answers in order; any part failing fails the whole.
func splitCall[T, R any](items []T, most int, call func([]T) ([]R, error)) ([]R, error) {
	if len(items) <= most {
		got, err := call(items)
		if err == nil && len(got) != len(items) {
			err = fmt.Errorf("freqcap client: %d answers for %d items", len(got), len(items))
		}
		return got, err
	}
	parts := (len(items) + most - 1) / most
	out := make([]R, len(items))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*most, min((p+1)*most, len(items))
		wg.Go(func() {
			got, err := splitCall(items[lo:hi], most, call)
			if err != nil {
				errs[p] = err
				return
			}
			copy(out[lo:hi], got)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// decide asks POST /v1/decide. The answer in the plain form the counter
// writes is read in place (verdictAnswers); any other is decoded whole.
func (h *httpReader) decide(ctx context.Context, req *counting.DecideRequest) ([]counting.Verdict, error) {
	var out []counting.Verdict
	err := h.exchange(ctx, h.decideURL, appendDecideBody(nil, req), func(status int, body []byte) error {
		var ok bool
		if status == http.StatusOK {
			if out, ok = verdictAnswers(body, req.Candidates); ok {
				return nil
			}
		}
		var err error
		out, err = decodeResults[counting.Verdict](status, body)
		return err
	})
	return out, err
}

// directDecide decides in this process as the counter's /v1/decide does.
func directDecide(counters campaign.Counters, parser *campaign.Parser, most int) func(context.Context, *counting.DecideRequest) ([]counting.Verdict, error) {
	return func(ctx context.Context, req *counting.DecideRequest) ([]counting.Verdict, error) {
		if err := parser.CheckDecide(req, most); err != nil {
			return nil, fmt.Errorf("freqcap client: %w", err)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("freqcap client: decide without a deadline")
		}
		return counters.Answer(ctx, req, time.Until(deadline)), nil
	}
}
