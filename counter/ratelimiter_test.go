package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/redistest"
)

func TestRateLimiterOverGRPCAndConnect(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_LIMITS_FILE="+policyFile(t, testPolicies))
	clients := map[string]freqcapv1connect.RateLimiterClient{
		"grpc":         freqcapv1connect.NewRateLimiterClient(h2c(), base, connect.WithGRPC()),
		"connect-json": freqcapv1connect.NewRateLimiterClient(http.DefaultClient, base, connect.WithProtoJSON()),
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			check := &freqcapv1.CheckReq{Key: "rpc:" + name, Algorithm: freqcapv1.Algorithm_ALGORITHM_SLIDING_LOG, Limit: 2, Period: "1m"}
			for i, want := range []bool{true, true, false} {
				rsp, err := c.Check(ctx, connect.NewRequest(check))
				if err != nil {
					t.Fatal(err)
				}
				if rsp.Msg.GetAllowed() != want || rsp.Msg.GetRemaining() != max(0, 1-int64(i)) {
					t.Fatalf("check %d: %v", i, rsp.Msg)
				}
				if !want && (rsp.Msg.GetRetryAfterMs() <= 0 || rsp.Msg.GetRetryAfterMs() > 60_000) {
					t.Fatalf("refused without a retry-after: %v", rsp.Msg)
				}
			}
			peek := proto.Clone(check).(*freqcapv1.CheckReq)
			peek.Cost = proto.Int64(0)
			// A peek at a spent key: what a hit of 1 would get, nothing taken.
			if rsp, err := c.Check(ctx, connect.NewRequest(peek)); err != nil || rsp.Msg.GetAllowed() || rsp.Msg.GetRemaining() != 0 ||
				rsp.Msg.GetRetryAfterMs() <= 0 || rsp.Msg.GetRetryAfterMs() > 60_000 {
				t.Fatalf("peek: %v %v, want refused with a retry-after", rsp, err)
			}

			rsp, err := c.BatchCheck(ctx, connect.NewRequest(&freqcapv1.BatchCheckReq{Checks: []*freqcapv1.CheckReq{
				{Key: "b:" + name, Policy: "login"},
				{Key: "b:" + name, Policy: "trial", Mode: freqcapv1.Mode_MODE_ENFORCE},
				{Key: "b:" + name, Policy: "trial", Mode: freqcapv1.Mode_MODE_ENFORCE},
			}}))
			if err != nil {
				t.Fatal(err)
			}
			r := rsp.Msg.GetResults()
			if rsp.Msg.GetCode() != 0 || len(r) != 3 || !r[0].GetAllowed() || len(r[0].GetLimits()) != 2 || !r[1].GetAllowed() || r[2].GetAllowed() {
				t.Fatalf("batch: %v", rsp.Msg)
			}

			// Bad input: INVALID_ARGUMENT naming the field, nothing decided.
			bad := &freqcapv1.CheckReq{Key: "bad:" + name, Algorithm: freqcapv1.Algorithm_ALGORITHM_GCRA, Limit: 1, Period: "soon"}
			_, err = c.Check(ctx, connect.NewRequest(bad))
			if code, app, msg := appCode(t, err); code != connect.CodeInvalidArgument || app != 10003 || !strings.Contains(msg, "period") {
				t.Fatalf("bad period: %v %d %s", code, app, msg)
			}
			_, err = c.Check(ctx, connect.NewRequest(&freqcapv1.CheckReq{Key: "bad:" + name, Limit: 1, Period: "1s"}))
			if code, app, msg := appCode(t, err); code != connect.CodeInvalidArgument || app != 10003 || !strings.Contains(msg, "algorithm") {
				t.Fatalf("no algorithm: %v %d %s", code, app, msg)
			}
			brsp, err := c.BatchCheck(ctx, connect.NewRequest(&freqcapv1.BatchCheckReq{Checks: []*freqcapv1.CheckReq{{Key: "bad:" + name, Policy: "login"}, bad}}))
			if err != nil || brsp.Msg.GetCode() != 10003 || !strings.Contains(brsp.Msg.GetMsg(), "checks[1].period") || len(brsp.Msg.GetResults()) != 0 {
				t.Fatalf("batch with a bad check: %v %v", brsp, err)
			}
		})
	}
	if keys := srv.Keys(t, "rl:{p:login:bad*"); len(keys) != 0 {
		t.Fatalf("a refused batch decided checks: %v", keys)
	}
}
