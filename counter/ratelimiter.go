package main

import (
	"context"
	"strings"

	"github.com/freqcap/freqcap/ratelimit"

	"connectrpc.com/connect"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// rateLimiter serves freqcap.v1.RateLimiter: the checks of POST /v1/limit
// over gRPC, gRPC-Web and Connect JSON, translated to the same wire types
// and decided by the same limiter.
type rateLimiter struct {
	l        *ratelimit.Checker
	maxBatch int
}

var _ freqcapv1connect.RateLimiterHandler = (*rateLimiter)(nil)

// algorithm is the kind of an Algorithm: ALGORITHM_FIXED_WINDOW is
// fixed_window; unspecified is "" (refused by validation, naming the field).
func algorithm(a freqcapv1.Algorithm) counting.Kind {
	if a == freqcapv1.Algorithm_ALGORITHM_UNSPECIFIED {
		return ""
	}
	return counting.Kind(strings.ToLower(strings.TrimPrefix(a.String(), "ALGORITHM_")))
}

func rule(r *freqcapv1.Rule) counting.Rule {
	return counting.Rule{Algorithm: algorithm(r.GetAlgorithm()), Limit: r.GetLimit(), Period: r.GetPeriod(),
		Burst: r.GetBurst(), Capacity: r.GetCapacity(), Acquire: r.GetAcquire()}
}

func checkRequest(m *freqcapv1.CheckReq) counting.LimitRequest {
	req := counting.LimitRequest{Key: m.GetKey(), Policy: m.GetPolicy(), Cost: m.Cost,
		Rule: counting.Rule{Algorithm: algorithm(m.GetAlgorithm()), Limit: m.GetLimit(), Period: m.GetPeriod(),
			Burst: m.GetBurst(), Capacity: m.GetCapacity(), Acquire: m.GetAcquire()}}
	for _, r := range m.GetLimits() {
		req.Limits = append(req.Limits, rule(r))
	}
	switch m.GetMode() {
	case freqcapv1.Mode_MODE_ENFORCE:
		req.Mode = counting.Enforce
	case freqcapv1.Mode_MODE_SHADOW:
		req.Mode = counting.Shadow
	}
	return req
}

func checkResponse(a *counting.LimitAnswer) *freqcapv1.CheckRsp {
	out := &freqcapv1.CheckRsp{Allowed: a.Allowed, Remaining: a.Remaining, RetryAfterMs: a.RetryAfterMs,
		ResetAfterMs: a.ResetAfterMs, DelayMs: a.DelayMs, Shadowed: a.Shadowed, Degraded: a.Degraded,
		Code: int32(a.Code), Msg: a.Msg}
	for _, d := range a.Limits {
		out.Limits = append(out.Limits, &freqcapv1.Decision{Allowed: d.Allowed, Remaining: d.Remaining,
			RetryAfterMs: d.RetryAfterMs, ResetAfterMs: d.ResetAfterMs, DelayMs: d.DelayMs})
	}
	return out
}

func (s *rateLimiter) Check(ctx context.Context, req *connect.Request[freqcapv1.CheckReq]) (*connect.Response[freqcapv1.CheckRsp], error) {
	_, as, err := s.l.Check(ctx, []counting.LimitRequest{checkRequest(req.Msg)}, false)
	if err != nil {
		return nil, invalidRPC(err)
	}
	return connect.NewResponse(checkResponse(&as[0])), nil
}

func (s *rateLimiter) BatchCheck(ctx context.Context, req *connect.Request[freqcapv1.BatchCheckReq]) (*connect.Response[freqcapv1.BatchCheckRsp], error) {
	checks := req.Msg.GetChecks()
	if len(checks) == 0 || len(checks) > s.maxBatch {
		return connect.NewResponse(&freqcapv1.BatchCheckRsp{Code: apierr.InvalidArgument,
			Msg: apierr.Invalid("checks must hold 1 to %d checks, got %d", s.maxBatch, len(checks)).Error()}), nil
	}
	reqs := make([]counting.LimitRequest, len(checks))
	for i, c := range checks {
		reqs[i] = checkRequest(c)
	}
	_, as, err := s.l.Check(ctx, reqs, true)
	if err != nil {
		return connect.NewResponse(&freqcapv1.BatchCheckRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
	}
	out := &freqcapv1.BatchCheckRsp{Msg: "ok", Results: make([]*freqcapv1.CheckRsp, len(as))}
	for i := range as {
		out.Results[i] = checkResponse(&as[i])
	}
	return connect.NewResponse(out), nil
}
