package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/freqcap/freqcap/core"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// freqControl serves the FrequencyControl service (gRPC, gRPC-Web and
// Connect JSON from one handler) as a view over the counting core: a
// business key is one window counter (kind seconds or day) in
// gfreq:{b:<business id>:<key>}.
type freqControl struct {
	log          *slog.Logger
	store        *core.Store
	lim          *core.Limits
	maxBatch     int // BatchAddFreq
	maxReadBatch int // BatchGetFreq
	writeTimeout time.Duration
	sometimes    rate.Sometimes
}

var _ freqcapv1connect.FrequencyControlHandler = (*freqControl)(nil)

// rpcError is an RPC error whose detail carries the application code, so
// gRPC and Connect callers both see 10003 and the field at fault.
func rpcError(code connect.Code, app int, msg string) error {
	e := connect.NewError(code, errors.New(msg))
	if d, err := connect.NewErrorDetail(&freqcapv1.Error{Code: int32(app), Msg: msg}); err == nil {
		e.AddDetail(d)
	}
	return e
}

func invalidRPC(err error) error {
	return rpcError(connect.CodeInvalidArgument, apierr.InvalidArgument, err.Error())
}

// addItem validates one AddFreqReq and turns it into an item; field
// prefixes field names in errors (e.g. "requests[2].").
func (f *freqControl) addItem(r *freqcapv1.AddFreqReq, field string) (counting.Item, error) {
	it := counting.Item{
		Scope:   counting.Scope{Business: r.GetBusinessId()},
		Subject: counting.Subject{ID: r.GetKey()},
		Spec:    counting.Spec{Span: int64(r.GetTimeSpan())},
		Hits:    1,
		EventID: r.GetEventId(),
	}
	if err := checkBusinessKey(r.GetBusinessId(), r.GetKey(), field); err != nil {
		return it, err
	}
	var most int
	switch r.GetTimeUnit() {
	case freqcapv1.TimeUnit_TIME_UNIT_SEC:
		it.Spec.Kind, most = counting.Seconds, f.lim.MaxSeconds
	case freqcapv1.TimeUnit_TIME_UNIT_DAY:
		it.Spec.Kind, most = counting.Day, f.lim.MaxDays
	default:
		return it, apierr.Invalid("%stime_unit must be TIME_UNIT_SEC or TIME_UNIT_DAY", field)
	}
	if it.Spec.Span < 1 || it.Spec.Span > int64(most) {
		return it, apierr.Invalid("%stime_span must be between 1 and %d for %s", field, most, r.GetTimeUnit())
	}
	if it.EventID != "" && !ids.ValidID(it.EventID) {
		return it, apierr.Invalid("%sevent_id must be %s", field, ids.IDRule)
	}
	return it, f.lim.Check(&it, true, field)
}

// getItem validates one GetFreqReq: a read of whatever window is live.
func (f *freqControl) getItem(r *freqcapv1.GetFreqReq, field string) (counting.Item, error) {
	it := counting.Item{
		Scope:   counting.Scope{Business: r.GetBusinessId()},
		Subject: counting.Subject{ID: r.GetKey()},
		Spec:    counting.Spec{Kind: counting.Seconds},
	}
	if err := checkBusinessKey(r.GetBusinessId(), r.GetKey(), field); err != nil {
		return it, err
	}
	return it, f.lim.Check(&it, false, field)
}

func checkBusinessKey(business uint32, key, field string) error {
	if business == 0 {
		return apierr.Invalid("%sbusiness_id must be greater than 0", field)
	}
	if !ids.ValidKey(key) {
		return apierr.Invalid("%skey must be %s", field, ids.KeyRule)
	}
	return nil
}

// answer is the code, msg, freq and ttl of one result. Internal detail is
// logged (at most once a second), never sent.
func (f *freqControl) answer(ctx context.Context, r *counting.Result) (code int32, msg string, freq, ttl uint32) {
	switch r.Code {
	case apierr.OK:
	case apierr.KeyNotFound:
		code, msg = apierr.KeyNotFound, "key not found: no live window"
	case apierr.Timeout:
		code, msg = apierr.Timeout, "redis did not answer in time"
	default:
		code, msg = apierr.Unavailable, "redis unavailable"
	}
	if code == apierr.Timeout || code == apierr.Unavailable {
		f.sometimes.Do(func() { f.log.WarnContext(ctx, "frequency control: redis failed", "code", r.Code, "err", r.Msg) })
		return code, msg, 0, 0
	}
	return code, msg, uint32(min(r.Count, math.MaxUint32)), uint32(min((r.TTLMs+999)/1000, math.MaxUint32))
}

func (f *freqControl) write(ctx context.Context, its []counting.Item) []counting.Result {
	ctx, cancel := context.WithTimeout(ctx, f.writeTimeout)
	defer cancel()
	return f.store.WriteOrSkip(ctx, its)
}

func (f *freqControl) AddFreq(ctx context.Context, req *connect.Request[freqcapv1.AddFreqReq]) (*connect.Response[freqcapv1.AddFreqRsp], error) {
	it, err := f.addItem(req.Msg, "")
	if err != nil {
		return nil, invalidRPC(err)
	}
	res := f.write(ctx, []counting.Item{it})[0]
	code, msg, freq, ttl := f.answer(ctx, &res)
	switch code {
	case apierr.OK:
	case apierr.Timeout:
		// Writes do not degrade: the caller sees an error and retries.
		return nil, rpcError(connect.CodeDeadlineExceeded, int(code), msg)
	default:
		return nil, rpcError(connect.CodeUnavailable, int(code), msg)
	}
	return connect.NewResponse(&freqcapv1.AddFreqRsp{
		BusinessId: req.Msg.GetBusinessId(), Key: req.Msg.GetKey(), Freq: freq, Ttl: ttl,
	}), nil
}

func (f *freqControl) BatchAddFreq(ctx context.Context, req *connect.Request[freqcapv1.BatchAddFreqReq]) (*connect.Response[freqcapv1.BatchAddFreqRsp], error) {
	reqs := req.Msg.GetRequests()
	if err := f.checkSize(len(reqs), f.maxBatch); err != nil {
		return connect.NewResponse(&freqcapv1.BatchAddFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
	}
	its := make([]counting.Item, len(reqs))
	for i, r := range reqs {
		it, err := f.addItem(r, fmt.Sprintf("requests[%d].", i))
		if err != nil {
			return connect.NewResponse(&freqcapv1.BatchAddFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
		}
		its[i] = it
	}
	got := f.write(ctx, its)
	out := &freqcapv1.BatchAddFreqRsp{Msg: "ok", Results: make([]*freqcapv1.AddFreqRsp, len(got))}
	for i := range got {
		code, msg, freq, ttl := f.answer(ctx, &got[i])
		out.Results[i] = &freqcapv1.AddFreqRsp{Code: code, Msg: msg, BusinessId: reqs[i].GetBusinessId(), Key: reqs[i].GetKey(), Freq: freq, Ttl: ttl}
	}
	return connect.NewResponse(out), nil
}

func (f *freqControl) GetFreq(ctx context.Context, req *connect.Request[freqcapv1.GetFreqReq]) (*connect.Response[freqcapv1.GetFreqRsp], error) {
	it, err := f.getItem(req.Msg, "")
	if err != nil {
		return nil, invalidRPC(err)
	}
	res := f.store.Read(ctx, []counting.Item{it})[0]
	code, msg, freq, ttl := f.answer(ctx, &res)
	return connect.NewResponse(&freqcapv1.GetFreqRsp{
		Code: code, Msg: msg, BusinessId: req.Msg.GetBusinessId(), Key: req.Msg.GetKey(), Freq: freq, Ttl: ttl,
		Stale: res.Stale, AgeMs: res.AgeMs,
	}), nil
}

func (f *freqControl) BatchGetFreq(ctx context.Context, req *connect.Request[freqcapv1.BatchGetFreqReq]) (*connect.Response[freqcapv1.BatchGetFreqRsp], error) {
	reqs := req.Msg.GetRequests()
	if err := f.checkSize(len(reqs), f.maxReadBatch); err != nil {
		return connect.NewResponse(&freqcapv1.BatchGetFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
	}
	its := make([]counting.Item, len(reqs))
	for i, r := range reqs {
		it, err := f.getItem(r, fmt.Sprintf("requests[%d].", i))
		if err != nil {
			return connect.NewResponse(&freqcapv1.BatchGetFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
		}
		its[i] = it
	}
	got := f.store.Read(ctx, its)
	out := &freqcapv1.BatchGetFreqRsp{Msg: "ok", Results: make([]*freqcapv1.GetFreqRsp, len(got))}
	for i := range got {
		code, msg, freq, ttl := f.answer(ctx, &got[i])
		out.Results[i] = &freqcapv1.GetFreqRsp{Code: code, Msg: msg, BusinessId: reqs[i].GetBusinessId(), Key: reqs[i].GetKey(), Freq: freq, Ttl: ttl,
			Stale: got[i].Stale, AgeMs: got[i].AgeMs}
	}
	return connect.NewResponse(out), nil
}

func (f *freqControl) checkSize(n, most int) error {
	if n < 1 || n > most {
		return apierr.Invalid("requests must hold 1 to %d requests, got %d", most, n)
	}
	return nil
}

// healthChecker answers gRPC health checks: serving while Redis answers.
type healthChecker struct{ store *core.Store }

func (h healthChecker) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	if req.Service != "" && req.Service != freqcapv1connect.FrequencyControlName {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("unknown service %q", req.Service))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := h.store.Ping(ctx); err != nil {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// protoJSON is the Connect JSON codec with the API's original field names
// (business_id, time_span) and every field present, zeros included, so a
// JSON caller reads "code": 0 and "freq": 0 rather than nothing.
type protoJSON struct{}

func (protoJSON) Name() string { return "json" }

func (protoJSON) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto message", v)
	}
	return protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
}

func (protoJSON) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto message", v)
	}
	return protojson.Unmarshal(b, m)
}
