package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"connectrpc.com/connect"

	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/gen/freqcap/v1/freqcapv1connect"
)

// FreqControl calls the counter's generic frequency-control API (
// "at most N per key per span") over gRPC. Reads have a deadline and fail
// open: when the counter cannot answer in time they report 0, Degraded,
// and an error saying why. Writes do not degrade: they return the error,
// and a retry with the same event id never counts twice.
type FreqControl struct {
	rpc          freqcapv1connect.FrequencyControlClient
	readTimeout  time.Duration
	writeTimeout time.Duration
}

// FreqOptions tune a FreqControl. The zero value is usable.
type FreqOptions struct {
	// ReadTimeout bounds Get and GetBatch; 0 means 10 ms.
	ReadTimeout time.Duration
	// WriteTimeout bounds Add and AddBatch; 0 means 1 s.
	WriteTimeout time.Duration
	// HTTPClient sends the calls; nil means an HTTP/2 client without TLS
	// (h2c), as gRPC inside a network speaks.
	HTTPClient *http.Client
	// Token is the counter's bearer token (COUNTER_AUTH_TOKENS), sent as
	// gRPC authorization metadata; empty sends none.
	Token string
}

// Unit is the unit of a span.
type Unit = freqcapv1.TimeUnit

// Units of a span.
const (
	// Seconds: a window of span seconds, opened by the first Add of the key.
	Seconds Unit = freqcapv1.TimeUnit_TIME_UNIT_SEC
	// Days: span natural days in the counter's time zone, ending at the end
	// of the span-th day counting the day of the first Add.
	Days Unit = freqcapv1.TimeUnit_TIME_UNIT_DAY
)

// Key names one counter: a business and its key.
type Key struct {
	BusinessID uint32
	Key        string
}

// Add is one Add: count an event on a key in a window.
type Add struct {
	Key
	Span uint32
	Unit Unit
	// EventID makes a retry idempotent; optional.
	EventID string
}

// Freq is one key's count.
type Freq struct {
	Key
	// Freq is the count in the live window: after the Add, or now.
	Freq uint32
	// TTL is what is left of the live window; 0 when none.
	TTL time.Duration
	// Found is false when the key has no live window (code 10002).
	Found bool
	// Code is the answer's code: 0, 10002 (not found), or for a read the
	// counter could not serve 10001/10004 (then Degraded is set).
	Code int32
	// Degraded is set on a read that could not be served: Freq is then 0.
	Degraded bool
	// Stale is set on a read Redis could not serve in time that the
	// counter answered with the key's last-known Freq and TTL, read StaleMs
	// ago (COUNTER_STALE_MAX): a real answer, on a slightly old count.
	Stale   bool
	StaleMs int64
}

// NewFreqControl returns a FreqControl for the counter at counterURL.
func NewFreqControl(counterURL string, opts FreqOptions) (*FreqControl, error) {
	u, err := url.Parse(counterURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("freqcap client: counter URL must be http(s)://host:port, got %q", counterURL)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	hc := withToken(opts.HTTPClient, &http.Transport{Protocols: &p, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second}, opts.Token)
	c := &FreqControl{
		rpc:          freqcapv1connect.NewFrequencyControlClient(hc, counterURL, connect.WithGRPC()),
		readTimeout:  opts.ReadTimeout,
		writeTimeout: opts.WriteTimeout,
	}
	if c.readTimeout <= 0 {
		c.readTimeout = 10 * time.Millisecond
	}
	if c.writeTimeout <= 0 {
		c.writeTimeout = time.Second
	}
	return c, nil
}

// Add counts one event and returns the count after it.
func (c *FreqControl) Add(ctx context.Context, a Add) (Freq, error) {
	ctx, cancel := context.WithTimeout(ctx, c.writeTimeout)
	defer cancel()
	rsp, err := c.rpc.AddFreq(ctx, connect.NewRequest(addReq(a)))
	if err != nil {
		return Freq{Key: a.Key}, fmt.Errorf("freqcap client: add: %w", err)
	}
	return freq(a.Key, rsp.Msg.GetCode(), rsp.Msg.GetFreq(), rsp.Msg.GetTtl()), nil
}

// AddBatch counts every Add in one call; each answer carries its own code
// (10001/10004 for an Add Redis could not count: retry those).
func (c *FreqControl) AddBatch(ctx context.Context, adds []Add) ([]Freq, error) {
	ctx, cancel := context.WithTimeout(ctx, c.writeTimeout)
	defer cancel()
	req := &freqcapv1.BatchAddFreqReq{Requests: make([]*freqcapv1.AddFreqReq, len(adds))}
	for i, a := range adds {
		req.Requests[i] = addReq(a)
	}
	rsp, err := c.rpc.BatchAddFreq(ctx, connect.NewRequest(req))
	if err == nil && rsp.Msg.GetCode() != 0 {
		err = fmt.Errorf("code %d: %s", rsp.Msg.GetCode(), rsp.Msg.GetMsg())
	}
	if err == nil && len(rsp.Msg.GetResults()) != len(adds) {
		err = fmt.Errorf("%d results for %d adds", len(rsp.Msg.GetResults()), len(adds))
	}
	if err != nil {
		return nil, fmt.Errorf("freqcap client: batch add: %w", err)
	}
	out := make([]Freq, len(adds))
	for i, r := range rsp.Msg.GetResults() {
		out[i] = freq(adds[i].Key, r.GetCode(), r.GetFreq(), r.GetTtl())
	}
	return out, nil
}

// Get reads one key. It fails open: on error the answer is 0 and Degraded.
func (c *FreqControl) Get(ctx context.Context, k Key) (Freq, error) {
	out, err := c.GetBatch(ctx, []Key{k})
	return out[0], err
}

// GetBatch reads every key in one call, answers in order. It fails open:
// keys the counter could not read answer 0 and Degraded, and the error
// says why.
func (c *FreqControl) GetBatch(ctx context.Context, keys []Key) ([]Freq, error) {
	out := make([]Freq, len(keys))
	for i, k := range keys {
		out[i] = Freq{Key: k, Degraded: true}
	}
	ctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	req := &freqcapv1.BatchGetFreqReq{Requests: make([]*freqcapv1.GetFreqReq, len(keys))}
	for i, k := range keys {
		req.Requests[i] = &freqcapv1.GetFreqReq{BusinessId: k.BusinessID, Key: k.Key}
	}
	rsp, err := c.rpc.BatchGetFreq(ctx, connect.NewRequest(req))
	if err == nil && rsp.Msg.GetCode() != 0 {
		err = fmt.Errorf("code %d: %s", rsp.Msg.GetCode(), rsp.Msg.GetMsg())
	}
	if err == nil && len(rsp.Msg.GetResults()) != len(keys) {
		err = fmt.Errorf("%d results for %d keys", len(rsp.Msg.GetResults()), len(keys))
	}
	if err != nil {
		return out, fmt.Errorf("freqcap client: get: %w", err)
	}
	var degraded int
	for i, r := range rsp.Msg.GetResults() {
		out[i] = freq(keys[i], r.GetCode(), r.GetFreq(), r.GetTtl())
		out[i].Stale, out[i].StaleMs = r.GetStale(), r.GetAgeMs()
		if out[i].Degraded {
			degraded++
		}
	}
	if degraded > 0 {
		return out, fmt.Errorf("freqcap client: %d of %d reads degraded", degraded, len(keys))
	}
	return out, nil
}

func addReq(a Add) *freqcapv1.AddFreqReq {
	return &freqcapv1.AddFreqReq{BusinessId: a.BusinessID, Key: a.Key.Key, TimeSpan: a.Span, TimeUnit: a.Unit, EventId: a.EventID}
}

func freq(k Key, code int32, n, ttl uint32) Freq {
	f := Freq{Key: k, Code: code, Freq: n, TTL: time.Duration(ttl) * time.Second, Found: code == 0}
	f.Degraded = code != 0 && code != int32(freqcapv1.ErrCode_ERR_CODE_KEY_NOT_FOUND)
	return f
}
