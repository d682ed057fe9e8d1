package campaign

import (
	"context"
	"slices"
	"time"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// CheckReserve validates a reservation as CheckDecide validates a decide,
// and its bid id and TTL.
func (p *Parser) CheckReserve(req *counting.ReserveRequest, most int) error {
	if err := p.CheckDecide(&counting.DecideRequest{Identities: req.Identities, Candidates: req.Candidates}, most); err != nil {
		return err
	}
	switch {
	case !ids.ValidID(req.Bid):
		return apierr.Invalid("bid (the bid id its notices carry as eid) must be %s", ids.IDRule)
	case req.TTLMs < 0 || req.TTLMs > core.MaxReserveMs:
		return apierr.Invalid("ttlMs must be between 1 and %d, or 0 for the counter's COUNTER_RESERVE_TTL", core.MaxReserveMs)
	}
	return nil
}

// Reserve holds bid req.Bid on every counter the candidates' declared caps
// read for req's identities (each level and identity a decide would read),
// for ttl when req gives none, within timeout. An unknown campaign
// reserves nothing.
func (v Counters) Reserve(ctx context.Context, req *counting.ReserveRequest, ttl, timeout time.Duration) []counting.ReserveAnswer {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cids := make([]string, len(req.Candidates))
	for i, c := range req.Candidates {
		cids[i] = c.CID
	}
	d := v.Declarations(ctx, cids)
	ms := req.TTLMs
	if ms == 0 {
		ms = ttl.Milliseconds()
	}
	event := v.Store.Limits().Events[0]
	var its []counting.Item
	owner := []int{}
	out := make([]counting.ReserveAnswer, len(req.Candidates))
	for i, c := range req.Candidates {
		out[i].CID = c.CID
		if d.Unread[c.CID] {
			out[i].Code, out[i].Msg = v.Code(d.Err), "declared caps unavailable: "+core.FirstLine(d.Err)
			continue
		}
		for _, h := range held(c, d.Decls[c.CID], req.Identities) {
			its = append(its, counting.Item{Scope: counting.Scope{Campaign: h[1], Level: levelOf(h[0]), Event: event},
				Subject: counting.Subject{Dim: h[2], ID: h[3]}, Spec: counting.Spec{Kind: counting.Reserve, Span: ms}, Hits: 1, EventID: req.Bid})
			owner = append(owner, i)
		}
	}
	for k, r := range v.WriteOrSkip(ctx, its) {
		a := &out[owner[k]]
		if r.Code != apierr.OK {
			a.Code, a.Msg = r.Code, r.Msg
			continue
		}
		a.Counters++
	}
	return out
}

// held are the counters (level, its id, dimension, id) a decide of
// candidate c reads for ids: where its bid is held.
func held(c counting.Candidate, d *Declaration, ids map[string]string) [][4]string {
	if d == nil {
		return nil
	}
	p := newPlan(ids, 1, len(d.Caps))
	defer p.release()
	p.add(c, d)
	out := make([][4]string, 0, len(p.qs))
	for _, q := range p.qs {
		level := q.Level
		if level == "" {
			level = LevelCampaign
		}
		if h := [4]string{level, q.CID, q.Dims[0].Name, q.Dims[0].ID}; !slices.Contains(out, h) {
			out = append(out, h) // one per counter, whatever the events its caps count
		}
	}
	return out
}
