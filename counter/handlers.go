package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// dimCounts is one dimension's counts on the wire. Window is the single
// window's sum; Windows holds one sum per window when several were asked
// for; Pace is present when paceWindowSec was.
type dimCounts struct {
	Day     int64            `json:"day"`
	Window  *int64           `json:"window,omitempty"`
	Windows map[string]int64 `json:"windows,omitempty"`
	Pace    *paceCounts      `json:"pace,omitempty"`
}

type paceCounts struct {
	Count  int64 `json:"count"`
	LastAt int64 `json:"lastAt"`
}

type countsBody struct {
	Code          int                  `json:"code"`
	Msg           string               `json:"msg,omitempty"`
	CID           string               `json:"cid"`
	Event         string               `json:"event"`
	WindowHours   any                  `json:"windowHours"` // a number, or an array when several windows were asked for
	PaceWindowSec int                  `json:"paceWindowSec,omitempty"`
	Counts        map[string]dimCounts `json:"counts"`
	Degraded      *bool                `json:"degraded,omitempty"`
	Duplicate     bool                 `json:"duplicate,omitempty"`
}

func newCountsBody(q *Query, res *Result) countsBody {
	b := countsBody{CID: q.CID, Event: q.Event, WindowHours: q.maxWindow(), PaceWindowSec: q.PaceWindowSec,
		Counts: make(map[string]dimCounts, len(q.Dims)), Duplicate: res.Duplicate}
	if len(q.Windows) > 1 {
		b.WindowHours = q.Windows
	}
	for i, d := range q.Dims {
		c := &res.Counts[i]
		dc := dimCounts{Day: c.Day}
		switch {
		case len(q.Windows) == 1:
			dc.Window = &c.Windows[0]
		case len(q.Windows) > 1:
			dc.Windows = make(map[string]int64, len(q.Windows))
			for w, hours := range q.Windows {
				dc.Windows[strconv.Itoa(hours)] = c.Windows[w]
			}
		}
		if q.PaceWindowSec > 0 {
			dc.Pace = &paceCounts{Count: c.Pace.Count, LastAt: c.Pace.LastAt}
		}
		b.Counts[d.Name] = dc
	}
	return b
}

// readCode is the application code of a failed read.
func readCode(err error) int {
	if apierr.CodeOf(err) == apierr.Timeout {
		return apierr.Timeout
	}
	return apierr.Unavailable
}

// degrader turns failed reads into zero counts marked degraded, with a
// metric and a log line at most once per second.
type degrader struct {
	log      *slog.Logger
	metrics  *metrics
	sometime rate.Sometimes
}

func (d *degrader) mark(r *http.Request, b *countsBody, err error) {
	degraded := err != nil
	b.Degraded = &degraded
	if !degraded {
		return
	}
	b.Code = readCode(err)
	b.Msg = "counts unavailable, answered 0: " + firstLine(err)
	d.metrics.degradedReads.WithLabelValues(strconv.Itoa(b.Code)).Inc()
	d.sometime.Do(func() {
		d.log.WarnContext(r.Context(), "read degraded: answering 0", "code", b.Code, "err", err)
	})
}

func handleIncr(log *slog.Logger, p *parser, store *Store, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := p.fromURL(r.URL.Query(), nil)
		if err == nil && len(q.Windows) > 1 {
			err = apierr.Invalid("windowHours takes one window on writes (the largest of the campaign's caps)")
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
		defer cancel()
		res, err := store.Incr(ctx, &q)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, newCountsBody(&q, &res))
	})
}

func handleFreq(log *slog.Logger, p *parser, store *Store, deg *degrader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := p.fromURL(r.URL.Query(), nil)
		if err == nil && q.EID != "" {
			err = apierr.Invalid("eid is only accepted on writes")
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		res := store.Read(r.Context(), []Query{q})[0]
		b := newCountsBody(&q, &res)
		deg.mark(r, &b, res.Err)
		httpjson.Write(w, http.StatusOK, b)
	})
}

type batchRequest struct {
	Items []batchItem `json:"items"`
}

type batchBody struct {
	Code    int          `json:"code"`
	Msg     string       `json:"msg"`
	Results []countsBody `json:"results"`
}

// maxBatchBody bounds the JSON a batch may send: a full batch of the largest
// items fits many times over.
const maxBatchBody = 8 << 20

func handleFreqBatch(log *slog.Logger, p *parser, store *Store, deg *degrader, maxItems int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req batchRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBatchBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			httpjson.Error(w, r, log, apierr.Invalid("body must be JSON {\"items\":[...]}: %s", err))
			return
		}
		if len(req.Items) == 0 || len(req.Items) > maxItems {
			httpjson.Error(w, r, log, apierr.Invalid("items must hold 1 to %d items, got %d", maxItems, len(req.Items)))
			return
		}
		qs := make([]Query, len(req.Items))
		for i, it := range req.Items {
			q, err := p.fromItem(it, fmt.Sprintf("items[%d].", i))
			if err != nil {
				httpjson.Error(w, r, log, err)
				return
			}
			qs[i] = q
		}
		results := store.Read(r.Context(), qs)
		b := batchBody{Code: apierr.OK, Msg: "ok", Results: make([]countsBody, len(qs))}
		for i := range qs {
			b.Results[i] = newCountsBody(&qs[i], &results[i])
			deg.mark(r, &b.Results[i], results[i].Err)
		}
		httpjson.Write(w, http.StatusOK, b)
	})
}

// paceNames are the outcomes of a pace check on the wire.
var paceNames = map[int]string{PaceAllowed: "allowed", PaceOverLimit: "over_limit", PaceTooSoon: "too_soon"}

type paceDimBody struct {
	Result     string `json:"result"`
	ResultCode int    `json:"resultCode"`
	Count      int64  `json:"count"`
	LastAt     int64  `json:"lastAt"`
}

type paceBody struct {
	Code       int                    `json:"code"`
	CID        string                 `json:"cid"`
	Event      string                 `json:"event"`
	Result     string                 `json:"result"`
	ResultCode int                    `json:"resultCode"`
	Dims       map[string]paceDimBody `json:"dims"`
	Duplicate  bool                   `json:"duplicate,omitempty"`
}

func handlePace(log *slog.Logger, p *parser, store *Store, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var windowSec, limit, minGapSec string
		q, err := p.fromURL(r.URL.Query(), map[string]*string{"windowSec": &windowSec, "limit": &limit, "minGapSec": &minGapSec})
		if err == nil && (len(q.Windows) > 0 || q.PaceWindowSec > 0) {
			err = apierr.Invalid("pace takes windowSec, limit and minGapSec, not windowHours or paceWindowSec")
		}
		rule, perr := paceRule(p, windowSec, limit, minGapSec)
		if err == nil {
			err = perr
		}
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), writeTimeout)
		defer cancel()
		res, err := store.Pace(ctx, &q, rule)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		b := paceBody{CID: q.CID, Event: q.Event, Result: paceNames[res.Result], ResultCode: res.Result,
			Dims: make(map[string]paceDimBody, len(q.Dims)), Duplicate: res.Duplicate}
		for i, d := range q.Dims {
			pd := res.Dims[i]
			b.Dims[d.Name] = paceDimBody{Result: paceNames[pd.Result], ResultCode: pd.Result, Count: pd.Count, LastAt: pd.LastAt}
		}
		httpjson.Write(w, http.StatusOK, b)
	})
}

// paceRule checks the pace parameters: windowSec and limit are required.
func paceRule(p *parser, windowSec, limit, minGapSec string) (PaceRule, error) {
	if windowSec == "" || limit == "" {
		return PaceRule{}, apierr.Invalid("windowSec and limit are required")
	}
	ws, err := intParam("windowSec", windowSec, 1, p.maxPace)
	if err != nil {
		return PaceRule{}, err
	}
	lim, err := intParam("limit", limit, 1, 1_000_000)
	if err != nil {
		return PaceRule{}, err
	}
	gap := 0
	if minGapSec != "" {
		if gap, err = intParam("minGapSec", minGapSec, 0, ws); err != nil {
			return PaceRule{}, err
		}
	}
	return PaceRule{Window: time.Duration(ws) * time.Second, Limit: lim, MinGap: time.Duration(gap) * time.Second}, nil
}
