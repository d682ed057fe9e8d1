package main

import (
	"net/http"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	freqcapv1connect "github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
	"github.com/freqcap/freqcap/shared/health"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// addRoutes is the counter's whole HTTP API.
func addRoutes(r chi.Router, d deps) {
	m := d.httpMetrics
	r.Method(http.MethodPost, "/v1/incr", m.Route("/v1/incr", handleIncr(d.log, d.parser, d.campaigns, d.settings.WriteTimeout)))
	r.Method(http.MethodGet, "/v1/schema", m.Route("/v1/schema", handleSchema(d.settings)))
	r.Method(http.MethodPost, "/v1/incr/batch", m.Route("/v1/incr/batch", handleIncrBatch(d.log, d.parser, d.campaigns, d.settings.MaxBatch, d.settings.WriteTimeout)))
	r.Method(http.MethodGet, "/v1/freq", m.Route("/v1/freq", handleFreq(d.log, d.parser, d.campaigns, d.degrader)))
	r.Method(http.MethodPost, "/v1/freq/batch", m.Route("/v1/freq/batch", handleFreqBatch(d.log, d.parser, d.campaigns, d.degrader, d.settings.MaxReadBatch)))
	r.Method(http.MethodPost, "/v1/decide", m.Route("/v1/decide", handleDecide(d.log, d.caps)))
	r.Method(http.MethodPost, "/v1/reserve", m.Route("/v1/reserve", handleReserve(d.log, d.caps)))
	r.Method(http.MethodPost, "/v1/pace", m.Route("/v1/pace", handlePace(d.log, d.parser, d.campaigns, d.settings.WriteTimeout)))
	r.Method(http.MethodPost, "/v1/items", m.Route("/v1/items", handleItems(d.log, d.limits, d.store, d.degrader, d.settings.MaxBatch, d.settings.WriteTimeout)))
	r.Method(http.MethodPost, "/v1/limit", m.Route("/v1/limit", handleLimit(d.limiter)))
	r.Method(http.MethodPost, "/v1/limit/batch", m.Route("/v1/limit/batch", handleLimitBatch(d.limiter, d.settings.MaxBatch)))
	r.Method(http.MethodGet, "/v1/limit/gate", m.Route("/v1/limit/gate", handleGate(d.limiter)))
	r.Method(http.MethodPost, "/v1/views", m.Route("/v1/views", d.views.handleView()))
	r.Method(http.MethodGet, "/v1/views", m.Route("/v1/views", d.views.handleTotal(d.degrader)))
	rpc, fc := freqcapv1connect.NewFrequencyControlHandler(d.freqControl, connect.WithReadMaxBytes(int(batchBody(d.settings.MaxBatch))), connect.WithCodec(protoJSON{}))
	r.Handle(rpc+"*", m.Route(rpc, fc))
	rpc, rl := freqcapv1connect.NewRateLimiterHandler(&rateLimiter{l: d.limiter, maxBatch: d.settings.MaxBatch}, connect.WithReadMaxBytes(int(batchBody(d.settings.MaxBatch))), connect.WithCodec(protoJSON{}))
	r.Handle(rpc+"*", m.Route(rpc, rl))
	rpc, cs := freqcapv1connect.NewCapsHandler(d.caps, connect.WithReadMaxBytes(int(batchBody(d.settings.MaxReadBatch))), connect.WithCodec(protoJSON{}))
	r.Handle(rpc+"*", m.Route(rpc, cs))
	reflector := grpcreflect.NewStaticReflector(freqcapv1connect.FrequencyControlName, freqcapv1connect.RateLimiterName, freqcapv1connect.CapsName, grpchealth.HealthV1ServiceName)
	r.Handle(mountRPC(grpcreflect.NewHandlerV1(reflector)))
	r.Handle(mountRPC(grpcreflect.NewHandlerV1Alpha(reflector)))
	r.Handle(mountRPC(grpchealth.NewHandler(healthChecker{d.store})))
	r.Method(http.MethodGet, "/healthz", m.Route("/healthz", health.Live()))
	r.Method(http.MethodGet, "/readyz", m.Route("/readyz", health.Ready(d.log, "redis", d.store.Ping)))
	r.NotFound(m.Route("unmatched", http.HandlerFunc(httpjson.NotFound)).ServeHTTP)
	r.MethodNotAllowed(m.Route("unmatched", http.HandlerFunc(httpjson.MethodNotAllowed)).ServeHTTP)
}

// addOpsRoutes is the ops listener (COUNTER_OPS_ADDR, loopback by
// default): metrics and profiles, which say much about the traffic and
// cost CPU, away from the API, and health for probes.
func addOpsRoutes(r chi.Router, d deps) {
	r.Method(http.MethodGet, "/healthz", health.Live())
	r.Method(http.MethodGet, "/readyz", health.Ready(d.log, "redis", d.store.Ping))
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(d.gatherer, promhttp.HandlerOpts{}))
	r.Method(http.MethodGet, "/v1/hotkeys", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, map[string]any{"windowSec": 1, "hotAtReadsPerSec": d.settings.HotKeyRate, "keys": d.store.HotKeys()})
	}))
	r.Mount("/debug", middleware.Profiler())
	r.NotFound(http.HandlerFunc(httpjson.NotFound).ServeHTTP)
	r.MethodNotAllowed(http.HandlerFunc(httpjson.MethodNotAllowed).ServeHTTP)
}

// mountRPC turns a Connect handler's path prefix into a chi pattern.
func mountRPC(path string, h http.Handler) (string, http.Handler) { return path + "*", h }
