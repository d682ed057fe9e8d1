package main

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/deadline"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// degrader turns failed reads into zero counts marked degraded, with a
// metric and a log line at most once per second.
type degrader struct {
	log      *slog.Logger
	metrics  *metrics
	sometime rate.Sometimes
}

func (d *degrader) mark(r *http.Request, a *answer) {
	err := a.res.Err
	a.read = true
	a.degraded = err != nil
	if err == nil {
		return
	}
	code, msg := campaign.ReadCode(err), core.FirstLine(err)
	a.code, a.msg = code, msg
	d.count(r, code, msg)
}

// count records one degraded read: a metric, and a log line at most once
// a second.
func (d *degrader) count(r *http.Request, code int, msg string) {
	d.metrics.degradedReads.WithLabelValues(strconv.Itoa(code)).Inc()
	d.sometime.Do(func() {
		d.log.WarnContext(r.Context(), "read degraded: answering 0", "code", code, "err", msg)
	})
}

func handleIncr(log *slog.Logger, p *campaign.Parser, store campaign.Counters, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := p.FromQuery(r.URL.RawQuery, nil)
		if err == nil && len(q.Windows) > 1 {
			err = apierr.Invalid("windowHours takes one window on writes (the largest of the campaign's caps)")
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		ctx, cancel := deadline.Within(r.Context(), writeTimeout)
		defer cancel()
		res, err := store.Incr(ctx, &q)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		writeAnswers(w, []answer{{q: &q, res: &res, duplicate: res.Duplicate}}, false)
	})
}

func handleFreq(log *slog.Logger, p *campaign.Parser, store campaign.Counters, deg *degrader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := p.FromQuery(r.URL.RawQuery, nil)
		if err == nil && q.EID != "" {
			err = apierr.Invalid("eid is only accepted on writes")
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		res := store.Read(r.Context(), []campaign.Query{q})[0]
		a := answer{q: &q, res: &res}
		deg.mark(r, &a)
		writeAnswers(w, []answer{a}, false)
	})
}

// decodeBody reads one JSON object of at most limit bytes into v,
// strictly (httpjson.Unmarshal: exact member names, each once, none
// unknown, nothing after the object), from a body declared
// application/json.
//
// A body larger than smallBody (or of unknown length) is decoded only in
// one of decodeSlots: decoding a large body costs a few times its size in
// memory, so the slots bound what parallel large batches can take (60
// parallel bodies at the old 8 MB limit took the counter to 2 GB). One
// that waits longer than slotWait is answered 503, to be sent again.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, shape string) error {
	if err := httpjson.RequireJSON(r); err != nil {
		return err
	}
	if r.ContentLength < 0 || r.ContentLength > smallBody {
		if r.ContentLength > limit {
			return apierr.Invalid("body over %d bytes (%s): %d sent", limit, shape, r.ContentLength)
		}
		t := time.NewTimer(slotWait)
		select {
		case decodeSlots <- struct{}{}:
			t.Stop()
			defer func() { <-decodeSlots }()
		case <-t.C:
			return apierr.Unavailablef("busy decoding other large bodies: send again")
		case <-r.Context().Done():
			t.Stop()
			return apierr.Unavailablef("gone while waiting to decode: %v", r.Context().Err())
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return apierr.Invalid("body over %d bytes (%s)", limit, shape)
		}
		return apierr.Invalid("body must be JSON %s: %s", shape, err)
	}
	switch req := v.(type) {
	case *counting.BatchRequest:
		if decodeBatchFast(body, req) {
			return nil
		}
	case *counting.LimitRequest:
		if decodeLimitFast(body, req) {
			return nil
		}
	case *counting.DecideRequest:
		if decodeDecideFast(body, req) {
			return nil
		}
	}
	return httpjson.Unmarshal(body, v, shape)
}

// batchBody bounds the JSON of a batch of maxItems: 1 KiB an item, where
// the largest valid item (three 128-byte ids, ten windows, an eid) is
// under 700 bytes; 1 MiB for the default COUNTER_MAX_BATCH of 1000.
func batchBody(maxItems int) int64 { return int64(maxItems) << 10 }

// smallBody is the size up to which a body is decoded without a slot.
const smallBody = 64 << 10

// decodeSlots bound how many large bodies are decoded at once: decoding is
// CPU-bound, so more than the cores can run adds memory, not throughput.
var decodeSlots = make(chan struct{}, max(4, 2*runtime.GOMAXPROCS(0)))

// slotWait is how long a large body waits for a decode slot.
const slotWait = time.Second

// decodeBatch decodes a batch body {"items":[...]} into v and checks that
// it holds 1 to maxItems items (count reads them from v).
func decodeBatch(w http.ResponseWriter, r *http.Request, v any, count func() int, maxItems int) error {
	if err := decodeBody(w, r, batchBody(maxItems), v, `{"items":[...]}`); err != nil {
		return err
	}
	if n := count(); n == 0 || n > maxItems {
		return apierr.Invalid("items must hold 1 to %d items, got %d", maxItems, n)
	}
	return nil
}

func handleFreqBatch(log *slog.Logger, p *campaign.Parser, store campaign.Counters, deg *degrader, maxItems int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.BatchRequest
		if err := decodeBatch(w, r, &req, func() int { return len(req.Items) }, maxItems); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		qs := make([]campaign.Query, len(req.Items))
		for i, it := range req.Items {
			q, err := p.ReadItem(it, i)
			if err != nil {
				httpjson.Error(w, r, log, err)
				return
			}
			qs[i] = q
		}
		results := store.Read(r.Context(), qs)
		answers := make([]answer, len(qs))
		for i := range qs {
			answers[i] = answer{q: &qs[i], res: &results[i]}
			deg.mark(r, &answers[i])
		}
		writeAnswers(w, answers, true)
	})
}

// handleIncrBatch is POST /v1/incr/batch: many writes in one store call,
// answered per item in order. Unlike the read batch, an invalid item does
// not refuse the others: it gets its own code 10003 and msg, and nothing of
// it is counted; an item Redis failed on gets 10001/10004 (retry it with
// the same eid). Only a malformed body or a batch of the wrong size is a
// 400.
func handleIncrBatch(log *slog.Logger, p *campaign.Parser, store campaign.Counters, maxItems int, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.BatchRequest
		if err := decodeBatch(w, r, &req, func() int { return len(req.Items) }, maxItems); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		answers := make([]answer, len(req.Items))
		var qs []campaign.Query
		var at []int // answers index of each query
		for i, it := range req.Items {
			q, err := p.FromItem(it, i)
			if err == nil {
				err = q.CheckWrite(i)
			}
			q.Quiet = req.Quiet
			if err != nil {
				answers[i] = answer{q: &campaign.Query{}, res: &campaign.Result{}, code: apierr.CodeOf(err), msg: err.Error(), quiet: req.Quiet}
				continue
			}
			qs = append(qs, q)
			at = append(at, i)
		}
		if len(qs) > 0 {
			ctx, cancel := deadline.Within(r.Context(), writeTimeout)
			res, errs := store.IncrBatch(ctx, qs)
			cancel()
			for k, i := range at {
				answers[i] = answer{q: &qs[k], res: &res[k], duplicate: res[k].Duplicate, quiet: req.Quiet}
				if errs[k] != nil {
					answers[i].code, answers[i].msg, answers[i].duplicate = apierr.CodeOf(errs[k]), errs[k].Error(), false
				}
			}
		}
		writeAnswers(w, answers, true)
	})
}

// paceNames are the outcomes of a pace check on the wire.
var paceNames = map[int]string{counting.PaceAllowed: "allowed", counting.PaceOverLimit: "over_limit", counting.PaceTooSoon: "too_soon"}

func handlePace(log *slog.Logger, p *campaign.Parser, store campaign.Counters, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var windowSec, limit, minGapSec string
		q, err := p.FromQuery(r.URL.RawQuery, map[string]*string{"windowSec": &windowSec, "limit": &limit, "minGapSec": &minGapSec})
		if err == nil && (len(q.Windows) > 0 || q.PaceWindowSec > 0 || q.Week || q.Month) {
			err = apierr.Invalid("pace takes windowSec, limit and minGapSec, not windowHours, paceWindowSec, week or month")
		}
		rule, perr := paceRule(p, windowSec, limit, minGapSec)
		if err == nil {
			err = perr
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		ctx, cancel := deadline.Within(r.Context(), writeTimeout)
		defer cancel()
		res, err := store.Pace(ctx, &q, rule)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		b := counting.PaceAnswer{CID: q.CID, Event: q.Event, Result: paceNames[res.Result], ResultCode: res.Result,
			Dims: make(map[string]counting.PaceDim, len(q.Dims)), Duplicate: res.Duplicate}
		for i, d := range q.Dims {
			pd := res.Dims[i]
			b.Dims[d.Name] = counting.PaceDim{Result: paceNames[pd.Result], ResultCode: pd.Result, Count: pd.Count, LastAt: pd.LastAt}
		}
		httpjson.Write(w, http.StatusOK, b)
	})
}

// paceRule checks the pace parameters: windowSec and limit are required.
func paceRule(p *campaign.Parser, windowSec, limit, minGapSec string) (campaign.PaceRule, error) {
	if windowSec == "" || limit == "" {
		return campaign.PaceRule{}, apierr.Invalid("windowSec and limit are required")
	}
	ws, err := campaign.IntParam("windowSec", windowSec, 1, p.MaxPace())
	if err != nil {
		return campaign.PaceRule{}, err
	}
	lim, err := campaign.IntParam("limit", limit, 1, 1_000_000)
	if err != nil {
		return campaign.PaceRule{}, err
	}
	gap := 0
	if minGapSec != "" {
		if gap, err = campaign.IntParam("minGapSec", minGapSec, 0, ws); err != nil {
			return campaign.PaceRule{}, err
		}
	}
	return campaign.PaceRule{Window: time.Duration(ws) * time.Second, Limit: lim, MinGap: time.Duration(gap) * time.Second}, nil
}

// handleSchema answers GET /v1/schema: the dimensions, events and limits
// every write is checked against.
func handleSchema(s Settings) http.Handler {
	body := counting.Schema{Dimensions: s.Dimensions, Events: s.Events, MaxWindowHours: s.MaxWindowHours,
		MaxPaceWindowSec: s.MaxPaceWindowSec, MaxBatch: s.MaxBatch, MaxReadBatch: s.MaxReadBatch, DedupeTTLSec: int(s.DedupeTTL / time.Second)}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Write(w, http.StatusOK, body)
	})
}

// handleDecide is POST /v1/decide: one bid request's identities and
// candidate campaigns in, per candidate allowed or the declared cap that
// blocks it, within the read deadline, failing open per candidate.
// handleReserve is POST /v1/reserve: hold a bid on the counters its
// candidates' caps read, within the read deadline (it sits on the bid
// path); per candidate how many counters hold it, or Redis's code.
func handleReserve(log *slog.Logger, caps *capsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.ReserveRequest
		if err := decodeBody(w, r, batchBody(caps.maxItems), &req, `{"identities":{...},"candidates":[{"cid":...}],"bid":...}`); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		out, err := caps.reserve(r.Context(), &req)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, counting.ReserveResponse{Msg: "ok", Results: out})
	})
}

func handleDecide(log *slog.Logger, caps *capsService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.DecideRequest
		if err := decodeBody(w, r, batchBody(caps.maxItems), &req, `{"identities":{...},"candidates":[{"cid":...}]}`); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		out, err := caps.answer(r.Context(), &req)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		writeVerdicts(w, out)
	})
}
