package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/redistest"
)

// h2c is an HTTP client speaking HTTP/2 without TLS, as gRPC clients do.
func h2c() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}}
}

// rpcClients are the same service over gRPC (HTTP/2) and the Connect
// protocol's JSON (HTTP/1.1).
func rpcClients(base string) map[string]freqcapv1connect.FrequencyControlClient {
	return map[string]freqcapv1connect.FrequencyControlClient{
		"grpc":         freqcapv1connect.NewFrequencyControlClient(h2c(), base, connect.WithGRPC()),
		"connect-json": freqcapv1connect.NewFrequencyControlClient(http.DefaultClient, base, connect.WithProtoJSON()),
	}
}

func appCode(t *testing.T, err error) (connect.Code, int32, string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v is not a connect error", err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if e, ok := v.(*freqcapv1.Error); derr == nil && ok {
			return ce.Code(), e.Code, e.Msg
		}
	}
	t.Fatalf("error %v carries no freqcap.v1.Error detail", err)
	return 0, 0, ""
}

func TestFrequencyControlOverGRPCAndConnect(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	for name, c := range rpcClients(base) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			key := "user:" + name
			for want := uint32(1); want <= 3; want++ {
				rsp, err := c.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 7, Key: key, TimeSpan: 60, TimeUnit: freqcapv1.TimeUnit_TIME_UNIT_SEC}))
				if err != nil {
					t.Fatal(err)
				}
				if m := rsp.Msg; m.Code != 0 || m.Freq != want || m.Ttl < 59 || m.Ttl > 60 || m.BusinessId != 7 || m.Key != key {
					t.Fatalf("add %d: %v", want, m)
				}
			}
			// Another span counts into the live window and leaves its end alone.
			rsp, err := c.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 7, Key: key, TimeSpan: 3600}))
			if err != nil || rsp.Msg.Freq != 4 || rsp.Msg.Ttl > 60 {
				t.Fatalf("add with another span: %v %v, want freq 4 and the first window's ttl", rsp, err)
			}
			got, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{BusinessId: 7, Key: key}))
			if err != nil || got.Msg.Code != 0 || got.Msg.Freq != 4 || got.Msg.Ttl == 0 {
				t.Fatalf("get: %v %v", got, err)
			}
			// Idempotent retries by event id.
			for range 2 {
				rsp, err = c.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 8, Key: key, TimeSpan: 1, TimeUnit: freqcapv1.TimeUnit_TIME_UNIT_DAY, EventId: "order-1"}))
				if err != nil || rsp.Msg.Freq != 1 {
					t.Fatalf("add with event_id: %v %v, want freq 1 on the retry too", rsp, err)
				}
			}
			nf, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{BusinessId: 7, Key: "never"}))
			if err != nil || nf.Msg.Code != 10002 || nf.Msg.Freq != 0 || nf.Msg.Ttl != 0 {
				t.Fatalf("get of a key never added: %v %v, want code 10002", nf, err)
			}

			batch, err := c.BatchAddFreq(ctx, connect.NewRequest(&freqcapv1.BatchAddFreqReq{Requests: []*freqcapv1.AddFreqReq{
				{BusinessId: 9, Key: key + "a", TimeSpan: 10},
				{BusinessId: 9, Key: key + "b", TimeSpan: 2, TimeUnit: freqcapv1.TimeUnit_TIME_UNIT_DAY},
				{BusinessId: 9, Key: key + "a", TimeSpan: 10},
			}}))
			if err != nil || batch.Msg.Code != 0 || len(batch.Msg.Results) != 3 {
				t.Fatalf("batch add: %v %v", batch, err)
			}
			if r := batch.Msg.Results; r[0].Freq != 1 || r[1].Freq != 1 || r[2].Freq != 2 || r[0].Key != key+"a" || r[1].Ttl <= 86400 {
				t.Errorf("batch add results: %v", r)
			}
			gets, err := c.BatchGetFreq(ctx, connect.NewRequest(&freqcapv1.BatchGetFreqReq{Requests: []*freqcapv1.GetFreqReq{
				{BusinessId: 9, Key: key + "a"}, {BusinessId: 9, Key: "missing"}, {BusinessId: 9, Key: key + "b"},
			}}))
			if err != nil || gets.Msg.Code != 0 {
				t.Fatalf("batch get: %v %v", gets, err)
			}
			if r := gets.Msg.Results; r[0].Freq != 2 || r[1].Code != 10002 || r[2].Freq != 1 || r[2].Key != key+"b" {
				t.Errorf("batch get results: %v", r)
			}
		})
	}
}

func TestFrequencyControlBadInputChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_MAX_BATCH=3", "COUNTER_MAX_READ_BATCH=2", "COUNTER_MAX_SPAN_SEC=3600")
	rc := newClient(t, srv.URL())
	for name, c := range rpcClients(base) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for _, tt := range []struct {
				req  *freqcapv1.AddFreqReq
				want string
			}{
				{&freqcapv1.AddFreqReq{Key: "k", TimeSpan: 60}, "business_id must be greater than 0"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, TimeSpan: 60}, "key must be"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: strings.Repeat("k", 257), TimeSpan: 60}, "key must be"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "a\u200bb", TimeSpan: 60}, "key must be"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "a\nb", TimeSpan: 60}, "key must be"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k"}, "time_span must be between 1 and 3600"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k", TimeSpan: 3601}, "time_span must be between 1 and 3600"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k", TimeSpan: 400, TimeUnit: freqcapv1.TimeUnit_TIME_UNIT_DAY}, "time_span must be between 1 and 366"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k", TimeSpan: 1, TimeUnit: 7}, "time_unit must be"},
				{&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k", TimeSpan: 1, EventId: "a b"}, "event_id must be"},
			} {
				_, err := c.AddFreq(ctx, connect.NewRequest(tt.req))
				code, app, msg := appCode(t, err)
				if code != connect.CodeInvalidArgument || app != 10003 || !strings.Contains(msg, tt.want) {
					t.Errorf("%v: %v %d %q, want invalid_argument 10003 naming %q", tt.req, code, app, msg, tt.want)
				}
			}
			_, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{Key: "k"}))
			if code, app, _ := appCode(t, err); code != connect.CodeInvalidArgument || app != 10003 {
				t.Errorf("get without business_id: %v %d", code, app)
			}

			// One invalid request fails the whole batch, and nothing is written.
			b, err := c.BatchAddFreq(ctx, connect.NewRequest(&freqcapv1.BatchAddFreqReq{Requests: []*freqcapv1.AddFreqReq{
				{BusinessId: 5, Key: "ok", TimeSpan: 60}, {BusinessId: 5, Key: "", TimeSpan: 60},
			}}))
			if err != nil || b.Msg.Code != 10003 || !strings.Contains(b.Msg.Msg, "requests[1].key must be") || len(b.Msg.Results) != 0 {
				t.Errorf("batch with an invalid request: %v %v", b, err)
			}
			b, err = c.BatchAddFreq(ctx, connect.NewRequest(&freqcapv1.BatchAddFreqReq{Requests: make([]*freqcapv1.AddFreqReq, 4)}))
			if err != nil || b.Msg.Code != 10003 || !strings.Contains(b.Msg.Msg, "requests must hold 1 to 3") {
				t.Errorf("batch over the size limit: %v %v", b, err)
			}
			if g, err := c.BatchGetFreq(ctx, connect.NewRequest(&freqcapv1.BatchGetFreqReq{Requests: make([]*freqcapv1.GetFreqReq, 3)})); err != nil || g.Msg.Code != 10003 || !strings.Contains(g.Msg.Msg, "requests must hold 1 to 2") {
				t.Errorf("read batch over COUNTER_MAX_READ_BATCH: %v %v", g, err)
			}
			g, err := c.BatchGetFreq(ctx, connect.NewRequest(&freqcapv1.BatchGetFreqReq{Requests: []*freqcapv1.GetFreqReq{{BusinessId: 5, Key: "ok"}, {BusinessId: 0, Key: "x"}}}))
			if err != nil || g.Msg.Code != 10003 || !strings.Contains(g.Msg.Msg, "requests[1].business_id") {
				t.Errorf("batch get with an invalid request: %v %v", g, err)
			}
		})
	}
	if n := rawInt(t, rc, "DBSIZE"); n != 0 {
		t.Errorf("bad input wrote %d keys", n)
	}
}

// A request Redis fails on answers its own code while the others of the
// batch succeed; the detail stays in the log.
func TestFrequencyControlPartialFailure(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	rc := newClient(t, srv.URL())
	raw(t, rc, "HSET", "gfreq:{b:3:broken}", "f", "1") // not a String: WRONGTYPE for this key only
	c := rpcClients(base)["connect-json"]
	b, err := c.BatchAddFreq(context.Background(), connect.NewRequest(&freqcapv1.BatchAddFreqReq{Requests: []*freqcapv1.AddFreqReq{
		{BusinessId: 3, Key: "fine", TimeSpan: 60}, {BusinessId: 3, Key: "broken", TimeSpan: 60}, {BusinessId: 3, Key: "also-fine", TimeSpan: 60},
	}}))
	if err != nil || b.Msg.Code != 0 {
		t.Fatalf("batch: %v %v", b, err)
	}
	r := b.Msg.Results
	if r[0].Code != 0 || r[0].Freq != 1 || r[2].Code != 0 || r[2].Freq != 1 {
		t.Errorf("healthy requests: %v %v", r[0], r[2])
	}
	if r[1].Code != 10004 || r[1].Msg != "redis unavailable" || r[1].Freq != 0 {
		t.Errorf("failed request: %v, want its own code 10004 and no internal detail", r[1])
	}
}

func TestFrequencyControlDeadlinesAndFailures(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_READ_TIMEOUT=50ms", "COUNTER_WRITE_TIMEOUT=300ms")
	ctx := context.Background()
	c := rpcClients(base)["grpc"]
	for _, key := range []string{"k", "seen"} {
		if _, err := c.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 1, Key: key, TimeSpan: 60})); err != nil {
			t.Fatal(err)
		}
	}
	if g, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{BusinessId: 1, Key: "seen"})); err != nil || g.Msg.Freq != 1 || g.Msg.Stale {
		t.Fatalf("read with redis up: %v %v", g, err)
	}
	srv.Pause()
	// A key read before: its last-known value, marked stale with its age.
	for _, get := range []func() (*freqcapv1.GetFreqRsp, error){
		func() (*freqcapv1.GetFreqRsp, error) {
			g, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{BusinessId: 1, Key: "seen"}))
			if err != nil {
				return nil, err
			}
			return g.Msg, nil
		},
		func() (*freqcapv1.GetFreqRsp, error) {
			b, err := c.BatchGetFreq(ctx, connect.NewRequest(&freqcapv1.BatchGetFreqReq{Requests: []*freqcapv1.GetFreqReq{{BusinessId: 1, Key: "seen"}}}))
			if err != nil {
				return nil, err
			}
			return b.Msg.Results[0], nil
		},
	} {
		g, err := get()
		if err != nil || g.Code != 0 || g.Freq != 1 || !g.Stale || g.AgeMs < 0 || g.AgeMs > 60_000 || g.Ttl == 0 || g.Ttl > 60 {
			t.Errorf("read of a known key with redis stopped: %v %v, want freq 1, stale, its age and ttl", g, err)
		}
	}
	start := time.Now()
	g, err := c.GetFreq(ctx, connect.NewRequest(&freqcapv1.GetFreqReq{BusinessId: 1, Key: "k"}))
	if took := time.Since(start); took > 50*time.Millisecond+250*time.Millisecond {
		t.Errorf("read with redis stopped took %s, deadline 50ms", took)
	}
	if err != nil || g.Msg.Code != 10001 || g.Msg.Freq != 0 {
		t.Errorf("read with redis stopped: %v %v, want code 10001 and freq 0", g, err)
	}
	_, err = c.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 1, Key: "k", TimeSpan: 60}))
	if code, app, _ := appCode(t, err); code != connect.CodeDeadlineExceeded || app != 10001 {
		t.Errorf("write with redis stopped: %v %d, want deadline_exceeded 10001 (writes do not degrade)", code, app)
	}
	srv.Resume()
	health := grpchealth.NewClient(h2c(), base, connect.WithGRPC())
	deadline := time.Now().Add(10 * time.Second)
	for {
		rsp, err := health.Check(ctx, &grpchealth.CheckRequest{Service: freqcapv1connect.FrequencyControlName})
		if err == nil && rsp.Status == grpchealth.StatusServing {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after resume: %v %v", rsp, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.Kill()
	rsp, err := health.Check(ctx, &grpchealth.CheckRequest{})
	if err != nil || rsp.Status != grpchealth.StatusNotServing {
		t.Errorf("health with redis killed: %v %v, want not serving", rsp, err)
	}
}

func TestFrequencyControlReflection(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	stream := grpcreflect.NewClient(h2c(), base, connect.WithGRPC()).NewStream(context.Background())
	defer stream.Close()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{freqcapv1connect.FrequencyControlName, freqcapv1connect.RateLimiterName, freqcapv1connect.CapsName} {
		var found bool
		for _, n := range names {
			found = found || string(n) == want
		}
		if !found {
			t.Errorf("reflection lists %v, want %s", names, want)
		}
	}
}

// The curl line of docs/frequency-control.md: Connect JSON over plain HTTP POST, the API's
// field names in the answer, zeros included.
func TestFrequencyControlCurl(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	req, _ := http.NewRequest("POST", base+"/freqcap.v1.FrequencyControl/AddFreq",
		strings.NewReader(`{"business_id":7,"key":"user:1","time_span":60,"time_unit":"TIME_UNIT_SEC"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := jsonDecode(resp.Body, &m); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v %v", resp.StatusCode, m, err)
	}
	expect(t, m, map[string]any{"code": 0, "msg": "", "business_id": 7, "key": "user:1", "freq": 1, "ttl": 60})

	req, _ = http.NewRequest("POST", base+"/freqcap.v1.FrequencyControl/AddFreq", strings.NewReader(`{"business_id":7,"key":"","time_span":60}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m = nil
	if err := jsonDecode(resp.Body, &m); err != nil || resp.StatusCode != 400 {
		t.Fatalf("bad key: %d %v %v", resp.StatusCode, m, err)
	}
	if msg, _ := m["message"].(string); m["code"] != "invalid_argument" || !strings.Contains(msg, "key must be") {
		t.Errorf("bad key: %v", m)
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
