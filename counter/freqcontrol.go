package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/freqcontrol"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// freqControl serves the FrequencyControl service (gRPC, gRPC-Web and
// Connect JSON from one handler) over package freqcontrol.
type freqControl struct {
	svc          *freqcontrol.Service
	maxBatch     int // BatchAddFreq
	maxReadBatch int // BatchGetFreq
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

func addOf(r *freqcapv1.AddFreqReq) freqcontrol.Add {
	a := freqcontrol.Add{Key: freqcontrol.Key{Business: r.GetBusinessId(), Key: r.GetKey()}, Span: int64(r.GetTimeSpan()), EventID: r.GetEventId()}
	switch r.GetTimeUnit() {
	case freqcapv1.TimeUnit_TIME_UNIT_SEC:
		a.Unit = freqcontrol.Seconds
	case freqcapv1.TimeUnit_TIME_UNIT_DAY:
		a.Unit = freqcontrol.Days
	}
	return a
}

func keyOf(r *freqcapv1.GetFreqReq) freqcontrol.Key {
	return freqcontrol.Key{Business: r.GetBusinessId(), Key: r.GetKey()}
}

func (f *freqControl) AddFreq(ctx context.Context, req *connect.Request[freqcapv1.AddFreqReq]) (*connect.Response[freqcapv1.AddFreqRsp], error) {
	it, err := f.svc.AddItem(addOf(req.Msg), "")
	if err != nil {
		return nil, invalidRPC(err)
	}
	a := f.svc.Write(ctx, []counting.Item{it})[0]
	switch a.Code {
	case apierr.OK:
	case apierr.Timeout:
		// Writes do not degrade: the caller sees an error and retries.
		return nil, rpcError(connect.CodeDeadlineExceeded, int(a.Code), a.Msg)
	default:
		return nil, rpcError(connect.CodeUnavailable, int(a.Code), a.Msg)
	}
	return connect.NewResponse(&freqcapv1.AddFreqRsp{
		BusinessId: req.Msg.GetBusinessId(), Key: req.Msg.GetKey(), Freq: a.Freq, Ttl: a.TTL,
	}), nil
}

func (f *freqControl) BatchAddFreq(ctx context.Context, req *connect.Request[freqcapv1.BatchAddFreqReq]) (*connect.Response[freqcapv1.BatchAddFreqRsp], error) {
	reqs := req.Msg.GetRequests()
	if err := freqcontrol.CheckSize(len(reqs), f.maxBatch); err != nil {
		return connect.NewResponse(&freqcapv1.BatchAddFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
	}
	its := make([]counting.Item, len(reqs))
	for i, r := range reqs {
		it, err := f.svc.AddItem(addOf(r), fmt.Sprintf("requests[%d].", i))
		if err != nil {
			return connect.NewResponse(&freqcapv1.BatchAddFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
		}
		its[i] = it
	}
	got := f.svc.Write(ctx, its)
	out := &freqcapv1.BatchAddFreqRsp{Msg: "ok", Results: make([]*freqcapv1.AddFreqRsp, len(got))}
	for i, a := range got {
		out.Results[i] = &freqcapv1.AddFreqRsp{Code: a.Code, Msg: a.Msg, BusinessId: reqs[i].GetBusinessId(), Key: reqs[i].GetKey(), Freq: a.Freq, Ttl: a.TTL}
	}
	return connect.NewResponse(out), nil
}

func (f *freqControl) GetFreq(ctx context.Context, req *connect.Request[freqcapv1.GetFreqReq]) (*connect.Response[freqcapv1.GetFreqRsp], error) {
	it, err := f.svc.GetItem(keyOf(req.Msg), "")
	if err != nil {
		return nil, invalidRPC(err)
	}
	a := f.svc.Read(ctx, []counting.Item{it})[0]
	return connect.NewResponse(&freqcapv1.GetFreqRsp{
		Code: a.Code, Msg: a.Msg, BusinessId: req.Msg.GetBusinessId(), Key: req.Msg.GetKey(), Freq: a.Freq, Ttl: a.TTL,
		Stale: a.Stale, AgeMs: a.AgeMs,
	}), nil
}

func (f *freqControl) BatchGetFreq(ctx context.Context, req *connect.Request[freqcapv1.BatchGetFreqReq]) (*connect.Response[freqcapv1.BatchGetFreqRsp], error) {
	reqs := req.Msg.GetRequests()
	if err := freqcontrol.CheckSize(len(reqs), f.maxReadBatch); err != nil {
		return connect.NewResponse(&freqcapv1.BatchGetFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
	}
	its := make([]counting.Item, len(reqs))
	for i, r := range reqs {
		it, err := f.svc.GetItem(keyOf(r), fmt.Sprintf("requests[%d].", i))
		if err != nil {
			return connect.NewResponse(&freqcapv1.BatchGetFreqRsp{Code: apierr.InvalidArgument, Msg: err.Error()}), nil
		}
		its[i] = it
	}
	got := f.svc.Read(ctx, its)
	out := &freqcapv1.BatchGetFreqRsp{Msg: "ok", Results: make([]*freqcapv1.GetFreqRsp, len(got))}
	for i, a := range got {
		out.Results[i] = &freqcapv1.GetFreqRsp{Code: a.Code, Msg: a.Msg, BusinessId: reqs[i].GetBusinessId(), Key: reqs[i].GetKey(), Freq: a.Freq, Ttl: a.TTL,
			Stale: a.Stale, AgeMs: a.AgeMs}
	}
	return connect.NewResponse(out), nil
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
	if b, ok := marshalFast(v); ok {
		return b, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto message", v)
	}
	return protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
}

func (protoJSON) Unmarshal(b []byte, v any) error {
	if unmarshalFast(b, v) {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto message", v)
	}
	return protojson.Unmarshal(b, m)
}
