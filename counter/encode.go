package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/freqcap/freqcap/campaign"

	"github.com/freqcap/freqcap/shared/httpjson"
)

// answer is the JSON of one query's counts, appended by hand: it is
// written once per bidder read, and encoding/json with a map per answer
// cost more than the rest of the handler. Names in it (cid, event,
// dimensions) are validated to plain ASCII before they get here; only msg
// can hold anything and goes through encoding/json.
//
// It is counting.Answer's JSON (TestAnswerJSONIsTheContract checks it):
//
//	{"code":0,"msg":"..","cid":"42","event":"win","windowHours":[2,24],
//	 "paceWindowSec":600,"counts":{"device":{"day":3,"windows":{"2":1,"24":2},
//	 "pace":{"count":1,"lastAt":1796210000123},"week":5,"month":9,"lifetime":11,"periods":{"day:3":7}}},"degraded":false,"duplicate":true}
type answer struct {
	q         *campaign.Query
	res       *campaign.Result
	code      int
	msg       string
	read      bool // reads carry "degraded"
	degraded  bool
	duplicate bool
	quiet     bool // a quiet write: code, msg and duplicate only
}

func (a *answer) appendJSON(b []byte) []byte {
	q := a.q
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(a.code), 10)
	if a.msg != "" {
		// A copy: what json.Marshal is given escapes, and the answer
		// (with the query and result it points to) stays on the stack.
		msg, _ := json.Marshal(strings.Clone(a.msg))
		b = append(b, `,"msg":`...)
		b = append(b, msg...)
	}
	if a.quiet {
		if a.duplicate {
			b = append(b, `,"duplicate":true`...)
		}
		return append(b, '}')
	}
	b = append(b, `,"cid":"`...)
	b = append(b, q.CID...)
	if q.Level != "" {
		b = append(b, `","level":"`...)
		b = append(b, q.Level...)
	}
	b = append(b, `","event":"`...)
	b = append(b, q.Event...)
	b = append(b, `","windowHours":[`...)
	for i, w := range q.Windows {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(w), 10)
	}
	b = append(b, ']')
	if q.PaceWindowSec > 0 {
		b = append(b, `,"paceWindowSec":`...)
		b = strconv.AppendInt(b, int64(q.PaceWindowSec), 10)
	}
	b = append(b, `,"counts":{`...)
	for i := range q.Dims {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.appendCounts(b, i)
	}
	b = append(b, '}')
	if a.read {
		b = append(b, `,"degraded":`...)
		b = strconv.AppendBool(b, a.degraded)
		if a.res.Stale && !a.degraded {
			b = append(b, `,"stale":true,"ageMs":`...)
			b = strconv.AppendInt(b, a.res.AgeMs, 10)
		}
	}
	if a.duplicate {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

// appendCounts appends the counts of the query's i-th dimension.
func (a *answer) appendCounts(b []byte, i int) []byte {
	q, c := a.q, &a.res.Counts[i]
	b = append(b, '"')
	b = append(b, q.Dims[i].Name...)
	b = append(b, `":{"day":`...)
	b = strconv.AppendInt(b, c.Day, 10)
	if len(q.Windows) > 0 {
		b = append(b, `,"windows":{`...)
		for w, hours := range q.Windows {
			if w > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = strconv.AppendInt(b, int64(hours), 10)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, c.Windows[w], 10)
		}
		b = append(b, '}')
	}
	if q.PaceWindowSec > 0 {
		b = append(b, `,"pace":{"count":`...)
		b = strconv.AppendInt(b, c.Pace.Count, 10)
		b = append(b, `,"lastAt":`...)
		b = strconv.AppendInt(b, c.Pace.LastAt, 10)
		b = append(b, '}')
	}
	if q.Week {
		b = append(b, `,"week":`...)
		b = strconv.AppendInt(b, c.Week, 10)
	}
	if q.Month {
		b = append(b, `,"month":`...)
		b = strconv.AppendInt(b, c.Month, 10)
	}
	if q.LifetimeEnd > 0 {
		b = append(b, `,"lifetime":`...)
		b = strconv.AppendInt(b, c.Lifetime, 10)
	}
	if len(q.Periods) > 0 {
		b = append(b, `,"periods":{`...)
		for p, pr := range q.Periods {
			if p > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, pr.Unit...)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(pr.N), 10)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, c.Periods[p], 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// buffers recycles answer buffers across requests.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeAnswers sends one answer, or a batch of them when batch is set.
func writeAnswers(w http.ResponseWriter, answers []answer, batch bool) {
	writeBuffered(w, func(b []byte) []byte {
		if batch {
			b = append(b, `{"code":0,"msg":"ok","results":[`...)
		}
		for i := range answers {
			if i > 0 {
				b = append(b, ',')
			}
			b = answers[i].appendJSON(b)
		}
		if batch {
			b = append(b, "]}"...)
		}
		return b
	})
}

// writeBuffered sends 200 with the JSON body appendTo appends, in a
// buffer of buffers (kept for the next answer unless it grew past 64 KiB).
func writeBuffered(w http.ResponseWriter, appendTo func([]byte) []byte) {
	bp := buffers.Get().(*[]byte)
	b := appendTo((*bp)[:0])
	httpjson.WriteRaw(w, http.StatusOK, b)
	if cap(b) <= 64<<10 {
		*bp = b
		buffers.Put(bp)
	}
}
