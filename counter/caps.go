package main

import (
	"context"
	"time"

	"connectrpc.com/connect"

	"github.com/freqcap/freqcap/campaign"
	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/counting"
)

// capsService is the Caps RPC: the same answers and validation as
// POST /v1/decide.
type capsService struct {
	parser      *campaign.Parser
	campaigns   campaign.Counters
	maxItems    int
	readTimeout time.Duration
	reserveTTL  time.Duration
	m           *metrics
}

// reserve validates and holds one bid, counting the reservations.
func (s *capsService) reserve(ctx context.Context, in *counting.ReserveRequest) ([]counting.ReserveAnswer, error) {
	if err := s.parser.CheckReserve(in, s.maxItems); err != nil {
		return nil, err
	}
	out := s.campaigns.Reserve(ctx, in, s.reserveTTL, s.readTimeout)
	s.m.reserved(out)
	return out, nil
}

// answer validates and decides one bid request, counting the verdicts.
func (s *capsService) answer(ctx context.Context, in *counting.DecideRequest) ([]counting.Verdict, error) {
	if err := s.parser.CheckDecide(in, s.maxItems); err != nil {
		return nil, err
	}
	out := s.campaigns.Answer(ctx, in, s.readTimeout)
	s.m.decided(out)
	return out, nil
}

var _ freqcapv1connect.CapsHandler = (*capsService)(nil)

func (s *capsService) Decide(ctx context.Context, r *connect.Request[freqcapv1.DecideReq]) (*connect.Response[freqcapv1.DecideRsp], error) {
	req := r.Msg
	in := counting.DecideRequest{Identities: req.GetIdentities(), Candidates: make([]counting.Candidate, len(req.GetCandidates())), Reserved: req.GetReserved()}
	for i, c := range req.GetCandidates() {
		in.Candidates[i] = counting.Candidate{CID: c.GetCid(), CRID: c.GetCrid()}
	}
	verdicts, err := s.answer(ctx, &in)
	if err != nil {
		return nil, invalidRPC(err)
	}
	out := &freqcapv1.DecideRsp{Results: make([]*freqcapv1.DecideVerdict, len(verdicts))}
	for i, v := range verdicts {
		pv := &freqcapv1.DecideVerdict{Cid: v.CID, Crid: v.CRID, Reserved: v.Reserved, Allowed: v.Allowed, Code: int32(v.Code), Msg: v.Msg, Reason: v.Reason,
			Count: v.Count, Degraded: v.Degraded, Stale: v.Stale, AgeMs: v.AgeMs}
		if c := v.Cap; c != nil {
			pv.Cap = &freqcapv1.DeclaredCap{Level: c.Level, Event: c.Event, Dim: c.Dim, Limit: c.Limit, Then: c.Then,
				Window: &freqcapv1.CapWindow{Unit: c.Window.Unit, N: int32(c.Window.N), MinGapSec: int32(c.Window.MinGapSec)}}
		}
		out.Results[i] = pv
	}
	return connect.NewResponse(out), nil
}
