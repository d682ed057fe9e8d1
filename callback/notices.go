package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/signing"
)

// pixel is a 1x1 transparent GIF, the answer to impression pixels.
var pixel = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")

// rejection is a refused notice: the reason label and the caller's error.
type rejection struct {
	reason string
	err    error
}

// checkValue refuses values an exchange left unfilled: an unsubstituted
// macro such as ${AUCTION_ID}, or AUDIT, the whole value an exchange puts
// in place of a macro when it renders an ad for review.
func checkValue(name, v string) *rejection {
	switch {
	case strings.Contains(v, "${"):
		return &rejection{"macro", apierr.Invalid("%s is an unsubstituted macro: %q", name, v)}
	case v == "AUDIT":
		return &rejection{"audit", apierr.Invalid("%s is an exchange test render (AUDIT): nothing counted", name)}
	}
	return nil
}

// parseNotice validates a notice's parameters against the counter's
// schema. Parameters other than cid, crid, eid and the dimensions are ignored:
// exchanges append their own (prices, ...). Before the counter has told
// its schema (sch nil), every parameter named like a dimension is kept, and
// the forwarder checks them once it knows the schema.
func parseNotice(event string, sch *counting.Schema, form url.Values) (notice, *rejection) {
	n := notice{event: event, cid: form.Get("cid"), eid: form.Get("eid")}
	if rej := checkValue("cid", n.cid); rej != nil {
		return n, rej
	}
	if n.cid == "" {
		return n, &rejection{"invalid", apierr.Invalid("cid is required")}
	}
	if !ids.ValidCID(n.cid) {
		return n, &rejection{"invalid", apierr.Invalid("cid must be %s", ids.CIDRule)}
	}
	if n.crid = form.Get("crid"); n.crid != "" && !ids.ValidCID(n.crid) {
		return n, &rejection{"invalid", apierr.Invalid("crid must be %s", ids.CIDRule)}
	}
	switch form.Get(reservedParam) {
	case "":
	case "0":
		n.unreserved = true
	default:
		return n, &rejection{"invalid", apierr.Invalid("%s must be 0 (the bid was not reserved) when given", reservedParam)}
	}
	n.dims = candidates(sch, form)
	if sch != nil {
		if len(sch.Events) > 0 && !slices.Contains(sch.Events, event) && event != lossEvent {
			return n, &rejection{"invalid", apierr.Invalid("the counter counts no %s events (it counts %s)", event, strings.Join(sch.Events, ", "))}
		}
		dims, rej := pickDimensions(sch, n.dims)
		if rej != nil {
			return n, rej
		}
		n.dims = dims
	} else if len(n.dims) == 0 {
		return n, &rejection{"invalid", apierr.Invalid("at least one dimension is required")}
	}
	if n.eid != "" {
		if rej := checkValue("eid", n.eid); rej != nil {
			return n, rej
		}
		if !ids.ValidID(n.eid) {
			return n, &rejection{"invalid", apierr.Invalid("eid must be %s", ids.IDRule)}
		}
	} else {
		// Retries of one delivery must not count twice even without an
		// exchange id: give the notice one of its own.
		n.eid = ids.Random("cb-")
	}
	return n, nil
}

// reservedParam is the parameter by which a notice URL says that its bid
// was not reserved (rsv=0; client.NoticeSigner.NoReservations signs it):
// its win ends no reservation, and its loss has nothing to do. Without
// it, a win or loss ends the bid's reservation if there is one.
const reservedParam = "rsv"

// maxNoticeBody bounds a notice's body: its parameters are a few hundred
// bytes.
const maxNoticeBody = 8 << 10

// noticeForm is the notice's parameters: the query's, with the body's
// (a POST form) added. A parameter given in both with different values is
// refused: the query is what the bidder signed into the notice URL, and a
// body must not change it.
func noticeForm(r *http.Request) (url.Values, *rejection) {
	if len(r.PostForm) == 0 {
		// No body (a GET, as exchanges send most): ParseForm's values are
		// the query's, parsed once.
		return r.Form, nil
	}
	q := r.URL.Query()
	for name, b := range r.PostForm {
		if len(b) == 0 {
			continue
		}
		if v, ok := q[name]; ok && (len(v) != 1 || len(b) != 1 || v[0] != b[0]) {
			return nil, &rejection{"conflict", apierr.Invalid("%s is given in the query and in the body with different values", name)}
		}
		if _, ok := q[name]; !ok {
			q[name] = b
		}
	}
	return q, nil
}

// handleNotice takes one kind of notice: check its signature (when keys
// are set), validate, write it to the journal, answer.
func handleNotice(d deps, event string, asPixel bool) http.Handler {
	return &noticeHandler{d: d, event: event, asPixel: asPixel,
		received: d.metrics.received.WithLabelValues(event), accepted: d.metrics.accepted.WithLabelValues(event),
		full: &rate.Sometimes{Interval: time.Second}, down: &rate.Sometimes{Interval: time.Second},
		unreplicated: &rate.Sometimes{Interval: time.Second}}
}

// noticeHandler serves one kind of notice. Each step answers the notice
// itself when it refuses it, and says so by returning false.
type noticeHandler struct {
	d                        deps
	event                    string
	asPixel                  bool
	received, accepted       prometheus.Counter
	full, down, unreplicated *rate.Sometimes // log lines at most once a second
}

func (h *noticeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.received.Inc()
	if !h.admit(w, r) {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxNoticeBody)
	form, exp, ok := h.params(w, r)
	if !ok {
		return
	}
	n, rej := parseNotice(h.event, h.d.schema.Get(), form)
	if rej != nil {
		h.refuse(w, r, rej.reason, rej.err)
		return
	}
	n.exp = exp
	if h.d.settings.RefuseUnknown && !h.known(w, r, n) {
		return
	}
	if n.event == lossEvent && n.unreserved {
		// The loss of a bid that was not reserved ends nothing and
		// counts nothing: it is not written.
		h.accepted.Inc()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !h.persist(w, r, n) {
		return
	}
	if to := form.Get("to"); h.event == "click" && h.d.verifier != nil && isWebURL(to) {
		// Signed, so never an open redirect: the bidder chose where.
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	if !h.asPixel || r.Method == http.MethodPost {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "image/gif")
	hd.Set("Cache-Control", "no-cache, no-store, must-revalidate, max-age=0")
	hd.Set("Pragma", "no-cache")
	hd.Set("Expires", "0")
	_, _ = w.Write(pixel)
}

// lossEvent is the notice of a lost bid: it releases the bid's
// reservation and counts nothing.
const lossEvent = "loss"

// isWebURL reports whether s is an absolute http(s) URL.
func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// refuse answers a notice refused for reason with err's code and status.
func (h *noticeHandler) refuse(w http.ResponseWriter, r *http.Request, reason string, err error) {
	h.d.metrics.rejected.WithLabelValues(h.event, reason).Inc()
	httpjson.Error(w, r, h.d.log, err)
}

// admit refuses notices while callback drains, and past a source's limit.
func (h *noticeHandler) admit(w http.ResponseWriter, r *http.Request) bool {
	m := h.d.metrics
	if h.d.draining.Load() {
		m.rejected.WithLabelValues(h.event, "draining").Inc()
		unavailable(w, "shutting down, send again")
		return false
	}
	if src := h.d.settings.Sources; src != nil {
		if ok, wait := src.allow(r); !ok {
			m.rejected.WithLabelValues(h.event, "source_limit").Inc()
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			httpjson.Write(w, http.StatusTooManyRequests, httpjson.Body{Code: apierr.Unavailable,
				Msg: "too many notices from this source (CALLBACK_SOURCE_LIMIT): send again after Retry-After"})
			return false
		}
	}
	return true
}

// params are the notice's parameters: with signing keys only what the
// bidder signed (the query before sig), with the URL's expiry; without,
// the query and the form body.
func (h *noticeHandler) params(w http.ResponseWriter, r *http.Request) (url.Values, time.Time, bool) {
	m := h.d.metrics
	if h.d.verifier != nil {
		signed, err := h.d.verifier.Verify(h.event, r.URL.RawQuery)
		if err != nil {
			var se *signing.Error
			errors.As(err, &se)
			m.sigFailures.WithLabelValues(se.Reason).Inc()
			m.rejected.WithLabelValues(h.event, "signature").Inc()
			httpjson.Write(w, http.StatusForbidden, httpjson.Body{Code: apierr.InvalidArgument, Msg: err.Error()})
			return nil, time.Time{}, false
		}
		if signed.Params.Get("eid") == "" {
			// The event id is what makes a signed URL count once.
			h.refuse(w, r, "invalid", apierr.Invalid("eid is required on a signed notice, and must be signed (before sig)"))
			return nil, time.Time{}, false
		}
		return signed.Params, signed.Exp, true
	}
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			m.rejected.WithLabelValues(h.event, "too_large").Inc()
			httpjson.Write(w, http.StatusRequestEntityTooLarge, httpjson.Body{Code: apierr.InvalidArgument,
				Msg: fmt.Sprintf("a notice body holds at most %d bytes", maxNoticeBody)})
			return nil, time.Time{}, false
		}
		h.refuse(w, r, "invalid", apierr.Invalid("malformed parameters: %s", err))
		return nil, time.Time{}, false
	}
	form, rej := noticeForm(r)
	if rej != nil {
		h.refuse(w, r, rej.reason, rej.err)
		return nil, time.Time{}, false
	}
	return form, time.Time{}, true
}

// known refuses a notice of a campaign the admin API does not know (read
// through client-side caching: a known campaign costs no round trip).
func (h *noticeHandler) known(w http.ResponseWriter, r *http.Request, n notice) bool {
	m := h.d.metrics
	ctx, cancel := context.WithTimeout(r.Context(), h.d.settings.AppendTimeout)
	_, known, err := h.d.campaigns.Get(ctx, n.cid)
	cancel()
	switch {
	case err != nil && !known:
		m.rejected.WithLabelValues(h.event, "journal_unavailable").Inc()
		h.down.Do(func() { h.d.log.Warn("campaigns unreadable: refusing notices with 503", "err", err) })
		unavailable(w, "campaigns unavailable, send again")
		return false
	case !known:
		m.rejected.WithLabelValues(h.event, "unknown_campaign").Inc()
		httpjson.Write(w, http.StatusNotFound, httpjson.Body{Code: apierr.KeyNotFound,
			Msg: "campaign " + n.cid + " is not known (CALLBACK_UNKNOWN_CAMPAIGNS=refuse): nothing counted"})
		return false
	}
	return true
}

// persist writes the notice to the journal before it is acknowledged: a
// 2xx promises the notice is in the journal, which outlives this process.
// A client that hangs up does not cancel the write: once sent, Redis
// applies it anyway, and the notice is then accepted (and counted) like
// any other. A signed notice taken before is answered as then.
func (h *noticeHandler) persist(w http.ResponseWriter, r *http.Request, n notice) bool {
	m, log := h.d.metrics, h.d.log
	// Bounded by its own deadline, and by nothing of the request's.
	ctx, cancel := context.WithTimeout(context.Background(), h.d.settings.AppendTimeout)
	err := h.d.journal.Append(ctx, n)
	cancel()
	switch {
	case err == nil:
		h.accepted.Inc()
	case errors.Is(err, errDuplicate):
		m.duplicates.WithLabelValues(h.event).Inc()
	case errors.Is(err, errJournalFull):
		m.rejected.WithLabelValues(h.event, "journal_full").Inc()
		h.full.Do(func() { log.Warn("journal full: refusing notices with 503 until the counter catches up") })
		unavailable(w, "journal full, send again")
		return false
	case errors.Is(err, redisconn.ErrNotReplicated):
		m.rejected.WithLabelValues(h.event, "journal_unreplicated").Inc()
		h.unreplicated.Do(func() { log.Warn("journal appends not replicated: refusing notices with 503", "err", err) })
		unavailable(w, "journal not replicated, send again")
		return false
	default:
		m.rejected.WithLabelValues(h.event, "journal_unavailable").Inc()
		h.down.Do(func() { log.Warn("journal unavailable: refusing notices with 503", "err", err) })
		unavailable(w, "journal unavailable, send again")
		return false
	}
	return true
}

// unavailable refuses a notice for now: nothing was kept, the exchange
// sends it again after Retry-After.
func unavailable(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", "1")
	httpjson.Write(w, http.StatusServiceUnavailable, httpjson.Body{Code: apierr.Unavailable, Msg: msg})
}
