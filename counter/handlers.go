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

// dimCounts is one dimension's counts on the wire; Window is absent when no
// window was asked for.
type dimCounts struct {
	Day    int64  `json:"day"`
	Window *int64 `json:"window,omitempty"`
}

type countsBody struct {
	Code        int                  `json:"code"`
	Msg         string               `json:"msg,omitempty"`
	CID         string               `json:"cid"`
	Event       string               `json:"event"`
	WindowHours int                  `json:"windowHours"`
	Counts      map[string]dimCounts `json:"counts"`
	Degraded    *bool                `json:"degraded,omitempty"`
	Duplicate   bool                 `json:"duplicate,omitempty"`
}

func newCountsBody(q *Query, res *Result) countsBody {
	b := countsBody{CID: q.CID, Event: q.Event, WindowHours: q.WindowHours, Counts: make(map[string]dimCounts, len(q.Dims))}
	for i, d := range q.Dims {
		c := dimCounts{Day: res.Counts[i].Day}
		if q.WindowHours > 0 {
			c.Window = &res.Counts[i].Window
		}
		b.Counts[d.Name] = c
	}
	b.Duplicate = res.Duplicate
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
		q, err := p.fromURL(r.URL.Query())
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
		q, err := p.fromURL(r.URL.Query())
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		if q.EID != "" {
			httpjson.Error(w, r, log, apierr.Invalid("eid is only accepted on writes"))
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
