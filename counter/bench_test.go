package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/freqcontrol"
	freqcapv1 "github.com/freqcap/freqcap/gen/freqcap/v1"
	"github.com/freqcap/freqcap/ratelimit"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/redistest"
)

func BenchmarkStoreIncr(b *testing.B) {
	srv := redistest.Start(b)
	st, _ := testStore(b, srv, newClock(time.Now()))
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		q := Query{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{
			{Name: "device", ID: "dev-" + strconv.Itoa(i%100000)}, {Name: "bundle", ID: "com.foo"}, {Name: "tagid", ID: "7"}}}
		if _, err := st.Incr(ctx, &q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreIncrBatch100 writes batches shaped like those callback's
// forwarder sends: 100 notices, each for a new device, on one hot tagid,
// with a 3-hour window.
func BenchmarkStoreIncrBatch100(b *testing.B) {
	srv := redistest.Start(b)
	st, _ := testStore(b, srv, newClock(time.Now()))
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		qs := make([]Query, 100)
		for i := range qs {
			n++
			qs[i] = Query{CID: "42", Event: "win", EID: "e" + strconv.Itoa(n), Windows: []int{3}, Dims: []Dim{
				{Name: "device", ID: "dev-" + strconv.Itoa(n%100000)}, {Name: "tagid", ID: "7"}}}
		}
		_, errs := st.IncrBatch(ctx, qs)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchRead(b *testing.B, qs []Query, kv ...string) {
	srv := redistest.Start(b)
	st, _ := testStore(b, srv, newClock(time.Now()), append([]string{"COUNTER_READ_TIMEOUT=1s"}, kv...)...)
	ctx := context.Background()
	for i := range qs {
		q := qs[i]
		if _, err := st.Incr(ctx, &q); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range st.Read(ctx, qs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
	}
}

func BenchmarkStoreReadDevice(b *testing.B) {
	// One device read over and over would turn hot: measure the read
	// straight from Redis.
	benchRead(b, []Query{{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "abc"}}}}, "COUNTER_HOT_KEY_RATE=0")
}

func BenchmarkStoreReadCached(b *testing.B) {
	benchRead(b, []Query{{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.foo"}, {Name: "tagid", ID: "7"}}}})
}

// BenchmarkStoreReadCachedNoLastKnown is BenchmarkStoreReadCached without
// remembering last-known values: what remembering costs a hot read.
func BenchmarkStoreReadCachedNoLastKnown(b *testing.B) {
	benchRead(b, []Query{{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.foo"}, {Name: "tagid", ID: "7"}}}}, "COUNTER_STALE_MAX=0")
}

func BenchmarkStoreReadBatch50(b *testing.B) {
	qs := make([]Query, 50)
	for i := range qs {
		qs[i] = Query{CID: strconv.Itoa(i), Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "abc"}, {Name: "bundle", ID: "com.foo"}, {Name: "tagid", ID: "7"}}}
	}
	benchRead(b, qs, "COUNTER_HOT_KEY_RATE=0")
}

// BenchmarkStoreReadBatch50NoLastKnown is BenchmarkStoreReadBatch50
// without remembering last-known values.
func BenchmarkStoreReadBatch50NoLastKnown(b *testing.B) {
	qs := make([]Query, 50)
	for i := range qs {
		qs[i] = Query{CID: strconv.Itoa(i), Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "device", ID: "abc"}, {Name: "bundle", ID: "com.foo"}, {Name: "tagid", ID: "7"}}}
	}
	benchRead(b, qs, "COUNTER_HOT_KEY_RATE=0", "COUNTER_STALE_MAX=0")
}

func BenchmarkParseQuery(b *testing.B) {
	s, err := loadSettings(nil)
	if err != nil {
		b.Fatal(err)
	}
	p := newParser(s)
	raw := "cid=42&device=6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f&bundle=com.foo.bar&tagid=1234&windowHours=3"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.FromQuery(raw, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch(b *testing.B) {
	s, err := loadSettings(nil)
	if err != nil {
		b.Fatal(err)
	}
	p := newParser(s)
	var items []string
	for c := 1; c <= 50; c++ {
		items = append(items, `{"cid":"c`+strconv.Itoa(c)+`","dims":{"device":"6f1c2a9e-8a3b-4c1d-9e2f-0a1b2c3d4e5f"},"windowHours":[3]}`)
	}
	body := []byte(`{"items":[` + strings.Join(items, ",") + `]}`)
	// plain: the counter's own decoder (decodeBody); httpjson: the
	// general one, which every batch went through before.
	for _, dec := range []struct {
		name   string
		decode func(*counting.BatchRequest) error
	}{
		{"plain", func(req *counting.BatchRequest) error {
			if !decodeBatchFast(body, req) {
				return errors.New("not plain")
			}
			return nil
		}},
		{"httpjson", func(req *counting.BatchRequest) error { return httpjson.Unmarshal(body, req, "batch") }},
	} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var req counting.BatchRequest
				if err := dec.decode(&req); err != nil {
					b.Fatal(err)
				}
				for i, it := range req.Items {
					if _, err := p.FromItem(it, i); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func benchFreqControl(b *testing.B) *freqControl {
	srv := redistest.Start(b)
	st, s := testStore(b, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=1s")
	return &freqControl{svc: freqcontrol.New(discardLogger(), st.Store, s.WriteTimeout), maxBatch: s.MaxBatch, maxReadBatch: s.MaxReadBatch}
}

func BenchmarkAddFreq(b *testing.B) {
	fc := benchFreqControl(b)
	ctx := context.Background()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		req := connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 7, Key: "user:" + strconv.Itoa(i%10000), TimeSpan: 86400})
		if _, err := fc.AddFreq(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBatchGetFreq50(b *testing.B) {
	fc := benchFreqControl(b)
	ctx := context.Background()
	req := &freqcapv1.BatchGetFreqReq{}
	for i := range 50 {
		key := "user:" + strconv.Itoa(i)
		if _, err := fc.AddFreq(ctx, connect.NewRequest(&freqcapv1.AddFreqReq{BusinessId: 7, Key: key, TimeSpan: 86400})); err != nil {
			b.Fatal(err)
		}
		req.Requests = append(req.Requests, &freqcapv1.GetFreqReq{BusinessId: 7, Key: key})
	}
	b.ReportAllocs()
	for b.Loop() {
		rsp, err := fc.BatchGetFreq(ctx, connect.NewRequest(req))
		if err != nil || rsp.Msg.Code != 0 || rsp.Msg.Results[49].Freq != 1 {
			b.Fatal(rsp, err)
		}
	}
}

// BenchmarkLimit is one rate-limit check per kind through the store, on
// rotating keys.
func BenchmarkLimit(b *testing.B) {
	srv := redistest.Start(b)
	st, _ := testStore(b, srv, newClock(time.Now()))
	ctx := context.Background()
	for _, k := range limiterKinds {
		b.Run(string(k), func(b *testing.B) {
			it := []counting.Item{{Scope: counting.Scope{Policy: "bench"}, Spec: counting.Spec{Kind: k, Limit: 100, PeriodMs: 60_000}, Hits: 1}}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				it[0].Subject.ID = "user:" + strconv.Itoa(i%10000)
				if r := st.Write(ctx, it)[0]; r.Code != 0 {
					b.Fatal(r.Msg)
				}
			}
		})
	}
}

// BenchmarkDedupeBytes reports what remembering event ids costs in Redis,
// per notice and dimension, with UUID event ids: used_memory after writing
// the notices with event ids less after writing them without. cold: one
// notice per device (a set of one); hot: every notice on one bundle (one
// large set).
func BenchmarkDedupeBytes(b *testing.B) {
	uuid := func(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }
	for _, tc := range []struct {
		name string
		dim  func(i int) Dim
	}{
		{"cold", func(i int) Dim { return Dim{Name: "device", ID: uuid(i)} }},
		{"hot", func(int) Dim { return Dim{Name: "bundle", ID: "com.hot"} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := redistest.Start(b)
			st, _ := testStore(b, srv, newClock(time.Now()))
			rc := newClient(b, srv.URL())
			ctx := context.Background()
			const notices = 20000
			used := func(eids bool) int64 {
				raw(b, rc, "FLUSHALL")
				before := usedMemory(b, rc)
				qs := make([]Query, 0, 100)
				for i := range notices {
					q := Query{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{tc.dim(i)}}
					if eids {
						q.EID = uuid(1<<30 + i)
					}
					qs = append(qs, q)
					if len(qs) == cap(qs) {
						if _, errs := st.IncrBatch(ctx, qs); errors.Join(errs...) != nil {
							b.Fatal(errors.Join(errs...))
						}
						qs = qs[:0]
					}
				}
				return usedMemory(b, rc) - before
			}
			var per float64
			for b.Loop() {
				per = float64(used(true)-used(false)) / notices
			}
			b.ReportMetric(per, "B/notice")
		})
	}
}

func usedMemory(b *testing.B, rc rueidis.Client) int64 {
	info, err := raw(b, rc, "INFO", "memory").ToString()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// BenchmarkStoreReadFullBatch is one read of a full COUNTER_MAX_BATCH of
// distinct queries (1,000 items of 3 dimensions, each with its own device),
// with 1 window and with 10 (the widest 168 hours), at the default read
// deadline (5 ms): it reports the share of queries that came back
// degraded, and the time of the whole call.
func BenchmarkStoreReadFullBatch(b *testing.B) {
	for _, size := range []int{200, 500, 1000} {
		for _, windows := range [][]int{{24}, {1, 2, 3, 6, 12, 24, 48, 72, 120, 168}} {
			b.Run(fmt.Sprintf("queries=%d/windows=%d", size, len(windows)), func(b *testing.B) {
				qs := make([]Query, size)
				for i := range qs {
					qs[i] = Query{CID: strconv.Itoa(i % 50), Event: "win", Windows: windows,
						Dims: []Dim{{Name: "device", ID: fmt.Sprintf("dev-%d", i)}, {Name: "bundle", ID: fmt.Sprintf("com.b%d", i%200)}, {Name: "tagid", ID: strconv.Itoa(i % 20)}}}
				}
				srv := redistest.Start(b)
				st, _ := testStore(b, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=5ms", "COUNTER_HOT_KEY_RATE=0", "COUNTER_STALE_MAX=0")
				ctx := context.Background()
				if _, errs := st.IncrBatch(ctx, qs); errors.Join(errs...) != nil {
					b.Fatal(errors.Join(errs...))
				}
				degraded, reads := 0, 0
				b.ReportAllocs()
				for b.Loop() {
					for _, r := range st.Read(ctx, qs) {
						if r.Err != nil {
							degraded++
						}
					}
					reads += len(qs)
				}
				b.ReportMetric(100*float64(degraded)/float64(reads), "%degraded")
			})
		}
	}
}

// BenchmarkLimitDuringAStall is a caller's rate-limit check (the
// limiter's path, COUNTER_READ_TIMEOUT 5 ms) at 1,000 checks a second on
// random keys, with Redis frozen (SIGSTOP) from the first fifth of the
// checks to the fourth. It reports the checks' p50, p99 and longest time,
// the share over the deadline plus 2 ms, and the share that failed open
// (3/5 of them were sent while Redis was frozen); skip=false sends every check
// to Redis as writes did before stalls covered them (each waits out its
// deadline).
func BenchmarkLimitDuringAStall(b *testing.B) {
	for _, skip := range []bool{true, false} {
		b.Run(fmt.Sprintf("skip=%v", skip), func(b *testing.B) {
			srv := redistest.StartSingle(b)
			st, s := testStore(b, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=5ms")
			l := &ratelimit.Checker{Log: discardLogger(), Store: st.Store, Policies: s.Policies, Timeout: s.ReadTimeout, Observe: st.m.limitCheck}
			if !skip {
				l = nil
			}
			req := counting.LimitRequest{Rule: counting.Rule{Algorithm: counting.GCRA, Limit: 100, Period: "1s"}}
			took := make([]time.Duration, 0, b.N)
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			defer srv.Resume()
			degraded := 0
			b.ResetTimer()
			for i := range b.N {
				switch i {
				case b.N / 5:
					srv.Pause()
				case 4 * b.N / 5:
					srv.Resume()
				}
				<-tick.C
				req.Key = "user:" + strconv.Itoa(rand.IntN(100_000))
				start := time.Now()
				if l != nil {
					_, as, err := l.Check(context.Background(), []counting.LimitRequest{req}, false)
					if err != nil {
						b.Fatal(err)
					}
					if as[0].Degraded {
						degraded++
					}
				} else {
					it := counting.Item{Scope: counting.Scope{Policy: "bench"}, Subject: counting.Subject{ID: req.Key},
						Spec: counting.Spec{Kind: counting.GCRA, Limit: 100, PeriodMs: 1000}, Hits: 1}
					ctx, cancel := context.WithTimeout(context.Background(), s.ReadTimeout)
					if st.Write(ctx, []counting.Item{it})[0].Code != 0 {
						degraded++
					}
					cancel()
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			over := 0
			for _, d := range took {
				if d > s.ReadTimeout+2*time.Millisecond {
					over++
				}
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
			b.ReportMetric(ms(took[len(took)*99/100]), "p99-ms")
			b.ReportMetric(ms(took[len(took)-1]), "max-ms")
			b.ReportMetric(100*float64(over)/float64(len(took)), "%over-deadline+2ms")
			b.ReportMetric(100*float64(degraded)/float64(len(took)), "%failed-open")
		})
	}
}

// discardWriter is an http.ResponseWriter that keeps only the status: the
// handler's own work, without net/http's connection.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkHotReadHandler is make bench's hot read without the network:
// GET /v1/freq of a bundle and a tagid from the client-side cache, through
// the counter's router (middleware, metrics, parsing, the store, the
// answer).
func BenchmarkHotReadHandler(b *testing.B) {
	srv := redistest.Start(b)
	st, s := testStore(b, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=1s")
	q := Query{CID: "42", Event: "win", Windows: []int{3}, Dims: []Dim{{Name: "bundle", ID: "com.foo.bar"}, {Name: "tagid", ID: "1234"}}}
	if _, err := st.Incr(context.Background(), &q); err != nil {
		b.Fatal(err)
	}
	h := NewServer(discardLogger(), s, st.Store, st.m, prometheus.NewRegistry())
	r := httptest.NewRequest(http.MethodGet, "/v1/freq?cid=42&bundle=com.foo.bar&tagid=1234&windowHours=3", nil)
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, r)
	if w.status != http.StatusOK {
		b.Fatal(w.status)
	}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
	}
}

// BenchmarkColdReadHandler is make bench's cold read without the network:
// GET /v1/freq of a device's 3-hour window, a different device each time,
// through the counter's router and a read of Redis.
func BenchmarkColdReadHandler(b *testing.B) {
	benchRequests(b, func(i int) *http.Request {
		return httptest.NewRequest(http.MethodGet, "/v1/freq?cid=42&device=dev-"+strconv.Itoa(i)+"&windowHours=3", nil)
	})
}

// BenchmarkBatchReadHandler is make bench's batch-50 without the network:
// POST /v1/freq/batch of 50 candidate campaigns' 3-hour windows on one
// device (UUID-shaped, as make bench's), a different device each time,
// through the counter's router and a read of Redis.
func BenchmarkBatchReadHandler(b *testing.B) {
	benchPost(b, "/v1/freq/batch", func(i int) string {
		return itemsBody(50, func(sb *strings.Builder, c int) {
			fmt.Fprintf(sb, `{"cid":"c%d","dims":{"device":"%08x-0000-4000-8000-%012x"},"windowHours":[3]}`, c+1, i, i)
		})
	})
}

// BenchmarkWriteHandler is make bench's write without the network: POST
// /v1/incr of a device (UUID-shaped, a new one each time), a shared bundle
// and tagid, a 3-hour window and an event id, through the counter's router
// and Redis's runs, answering the counts.
func BenchmarkWriteHandler(b *testing.B) {
	benchRequests(b, func(i int) *http.Request {
		return httptest.NewRequest(http.MethodPost, fmt.Sprintf("/v1/incr?cid=42&device=%08x-0000-4000-8000-%012x&bundle=com.hot&tagid=7&windowHours=3&eid=w-%d", i, i, i), nil)
	})
}

// BenchmarkWriteBatchHandler is make bench's write-batch-20 without the
// network: POST /v1/incr/batch of 20 notices, each on its own device
// (UUID-shaped) and a shared bundle and tagid, with event ids, through the
// counter's router and Redis's runs.
func BenchmarkWriteBatchHandler(b *testing.B) {
	benchPost(b, "/v1/incr/batch", func(i int) string {
		return itemsBody(20, func(sb *strings.Builder, n int) {
			d := i*20 + n
			fmt.Fprintf(sb, `{"cid":"42","dims":{"device":"%08x-0000-4000-8000-%012x","bundle":"com.hot","tagid":"7"},"windowHours":[3],"eid":"b-%d"}`, d, d, d)
		})
	})
}

// BenchmarkDecideHandler is a bidder's one question without the network:
// POST /v1/decide of 50 campaigns by id, each declaring a day and a
// 3-hour cap on the device and a day's on the bundle, for a new device
// (UUID-shaped) each time on one bundle, through the counter's router: the
// declarations and the bundle's counts from the process's table, the
// device's from Redis. Direct mode (client.DecideIDs) runs the same code.
func BenchmarkDecideHandler(b *testing.B) {
	srv := redistest.Start(b)
	caps := []counting.Cap{
		{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 3},
		{Level: "campaign", Event: "win", Dim: "device", Window: counting.CapWindow{Unit: "hours", N: 3}, Limit: 2},
		{Level: "campaign", Event: "win", Dim: "bundle", Window: counting.CapWindow{Unit: "day", N: 1}, Limit: 1000},
	}
	var cands strings.Builder
	for c := range 50 {
		declare(b, srv, fmt.Sprint("d", c), caps...)
		if c > 0 {
			cands.WriteByte(',')
		}
		fmt.Fprintf(&cands, `{"cid":"d%d"}`, c)
	}
	benchRequestsOn(b, srv, func(i int) *http.Request {
		body := fmt.Sprintf(`{"identities":{"device":"%08x-0000-4000-8000-%012x","bundle":"com.bench"},"candidates":[%s]}`, i, i, cands.String())
		r := httptest.NewRequest(http.MethodPost, "/v1/decide", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return r
	})
}

// itemsBody is a batch's body, {"items":[...]}: item writes its k-th of n.
func itemsBody(n int, item func(sb *strings.Builder, k int)) string {
	var sb strings.Builder
	sb.WriteString(`{"items":[`)
	for k := range n {
		if k > 0 {
			sb.WriteByte(',')
		}
		item(&sb, k)
	}
	sb.WriteString("]}")
	return sb.String()
}

// BenchmarkAddFreqHandler is make bench's AddFreq without the network: a
// Connect JSON call through the counter's router, on rotating keys.
func BenchmarkAddFreqHandler(b *testing.B) {
	benchPost(b, "/freqcap.v1.FrequencyControl/AddFreq", func(i int) string {
		return `{"business_id":7,"key":"user:` + strconv.Itoa(i%10000) + `","time_span":86400}`
	})
}

// BenchmarkLimitHandler is make bench's rate-limit check without the
// network: POST /v1/limit (gcra) through the counter's router, on rotating
// keys.
func BenchmarkLimitHandler(b *testing.B) {
	benchPost(b, "/v1/limit", func(i int) string {
		return `{"key":"user:` + strconv.Itoa(i%10000) + `","algorithm":"gcra","limit":100,"period":"1m","burst":10}`
	})
}

// benchPost posts body(i) as JSON to path through the counter's router,
// once per iteration, and wants 200 answers.
func benchPost(b *testing.B, path string, body func(i int) string) {
	benchRequests(b, func(i int) *http.Request {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body(i)))
		r.Header.Set("Content-Type", "application/json")
		return r
	})
}

// benchRequests serves request(i) through the counter's router, once per
// iteration, and wants 200 answers.
func benchRequests(b *testing.B, request func(i int) *http.Request) {
	benchRequestsOn(b, redistest.Start(b), request)
}

// benchRequestsOn is benchRequests on srv.
func benchRequestsOn(b *testing.B, srv *redistest.Server, request func(i int) *http.Request) {
	st, s := testStore(b, srv, newClock(time.Now()), "COUNTER_READ_TIMEOUT=1s")
	h := NewServer(discardLogger(), s, st.Store, st.m, prometheus.NewRegistry())
	w := &discardWriter{h: http.Header{}}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		r := request(i)
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatal(w.status)
		}
	}
}
