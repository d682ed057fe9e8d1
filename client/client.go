// Package client is what a bidder imports to apply frequency caps: one call
// per bid request reads the counts of every candidate campaign from the
// freqcap counter in one HTTP round trip, and decides which candidates are
// still allowed.
//
// The call has its own deadline (10 ms by default). When the counter is
// slow, unreachable, degraded or the client's own rate limit is reached, the
// decision fails open (allowed, marked Degraded) unless FailClosed is set.
// It never retries on the bid path.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	gojson "github.com/goccy/go-json"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/signing"
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// Timeout bounds one Decide call; 0 means 10 ms.
	Timeout time.Duration
	// FailClosed blocks candidates whose counts could not be read, instead
	// of allowing them.
	FailClosed bool
	// RateLimit caps calls per second to the counter, with Burst calls at
	// once; 0 means no limit. Calls over the limit are not sent and decide
	// as degraded: the bidder sheds load instead of piling it on the counter.
	RateLimit rate.Limit
	Burst     int
	// HTTPClient sends the requests; nil means a keep-alive client tuned
	// for many small concurrent calls to one host.
	HTTPClient *http.Client
	// Token is the bearer token the counter requires (one of its
	// COUNTER_AUTH_TOKENS); empty sends none.
	Token string
	// MaxBatch is the most counts (one per candidate and capped
	// dimension) read in one request; a larger call is split into
	// requests of at most MaxBatch that run at once, each within the
	// deadline. 0 means 200, the counter's default COUNTER_MAX_READ_BATCH
	// (a larger request is refused): what one Redis serves inside the
	// counter's 5 ms read deadline.
	MaxBatch int
	// CountReserved makes DecideIDs and DecideCreatives add the in-flight
	// bids (Reserve) to the counts every cap compares with its limit, so
	// concurrent auctions of one device do not all win against one count.
	CountReserved bool
}

// withToken is hc (or a new client on base when nil) sending token.
func withToken(hc *http.Client, base http.RoundTripper, token string) *http.Client {
	if hc == nil {
		hc = &http.Client{Transport: base}
	}
	if token == "" {
		return hc
	}
	c := *hc
	c.Transport = auth.Transport(token, hc.Transport)
	return &c
}

// Client reads counts from one counter, over HTTP (New) or straight from
// its Redis (NewDirect). It is safe for concurrent use.
type Client struct {
	readCaps   func(ctx context.Context, ids Identities, cands []Candidate, refs []ref) ([]counted, error)
	decide     func(context.Context, *counting.DecideRequest) ([]counting.Verdict, error)
	reserve    func(context.Context, *counting.ReserveRequest) ([]counting.ReserveAnswer, error)
	reserved   bool // Options.CountReserved
	close      func()
	timeout    time.Duration
	failClosed bool
	limiter    *rate.Limiter
	now        func() time.Time
	maxBatch   int
}

// ErrRateLimited reports a call not sent because of Options.RateLimit.
var ErrRateLimited = errors.New("freqcap client: rate limit reached, call not sent")

// New returns a Client for the counter at counterURL (http://host:port).
func New(counterURL string, opts Options) (*Client, error) {
	u, err := url.Parse(counterURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("freqcap client: counter URL must be http(s)://host:port, got %q", counterURL)
	}
	c := newClient(opts)
	h := &httpReader{batchURL: u.JoinPath("/v1/freq/batch").String(), decideURL: u.JoinPath("/v1/decide").String(),
		reserveURL: u.JoinPath("/v1/reserve").String()}
	h.http = withToken(opts.HTTPClient, &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}, opts.Token)
	c.readCaps, c.decide, c.reserve = h.readCaps, h.decide, h.reserveBid
	return c, nil
}

// newClient is what both kinds of Client share: the deadline, the rate
// limit and the default.
func newClient(opts Options) *Client {
	c := &Client{
		close:      func() {},
		timeout:    opts.Timeout,
		failClosed: opts.FailClosed,
		reserved:   opts.CountReserved,
		limiter:    rate.NewLimiter(rate.Inf, 0),
		now:        time.Now,
	}
	if c.timeout <= 0 {
		c.timeout = 10 * time.Millisecond
	}
	if opts.RateLimit > 0 {
		c.limiter = rate.NewLimiter(opts.RateLimit, max(opts.Burst, 1))
	}
	c.maxBatch = opts.MaxBatch
	if c.maxBatch <= 0 {
		c.maxBatch = 200
	}
	return c
}

// Close releases the Client's connections (those to Redis of a direct
// Client); the Client must not be used after.
func (c *Client) Close() { c.close() }

// Identities are the ids of one bid request by dimension, e.g.
// {"device": "6f1c...", "bundle": "com.example.app", "tagid": "banner-1"}.
type Identities map[string]string

// Candidate is one campaign that could answer the bid request, with its caps.
type Candidate struct {
	CID   string
	Event string // counted event: "win" when empty
	Caps  []Cap
}

// Cap is what one campaign allows in one dimension. Zero fields are no cap.
type Cap struct {
	Dim     string   // "device", "bundle", "tagid", ...
	Day     int64    // at most Day events per natural day
	Windows []Window // at most Limit events in the last Hours hours, for each
	Pace    *Pace    // exact sliding window with a minimum gap (split mode)
}

// Window is "at most Limit in the last Hours hours".
type Window struct {
	Hours int
	Limit int64
}

// Pace is "at most Limit in the last Window, never two within MinGap".
// The campaign must have the same paceWindowSec in callback, so that its
// events are recorded in the window.
type Pace struct {
	Window time.Duration
	Limit  int64
	MinGap time.Duration
}

// Reason says which cap blocked a candidate.
type Reason string

// Reasons a candidate is blocked.
const (
	DayCap   Reason = "day_cap"
	WeekCap  Reason = "week_cap"  // DecideIDs: a declared natural week
	MonthCap Reason = "month_cap" // DecideIDs: a declared calendar month
	// LifetimeCap is a declared lifetime cap (DecideIDs): until the
	// campaign's end.
	LifetimeCap Reason = "lifetime_cap"
	// Suppressed is a declared suppression (DecideIDs): a click or a
	// conversion blocks the campaign for the cap's window.
	Suppressed Reason = "suppressed"
	// NoIdentity is a request with none of the identities the campaign
	// caps on, which the campaign does not bid on (noIdentity nobid).
	NoIdentity Reason = "no_identity"
	WindowCap  Reason = "window_cap"
	PaceLimit  Reason = "pace_limit"
	PaceGap    Reason = "pace_gap"
	// Unavailable blocks a candidate whose counts could not be read, only
	// with Options.FailClosed.
	Unavailable Reason = "unavailable"
)

// Decision is the verdict on one candidate.
type Decision struct {
	CID     string
	CRID    string // the creative asked about (DecideCreatives)
	Allowed bool
	// Reason, Dim, Count and Limit describe the first cap that blocks:
	// Count events against a Limit (for PaceGap, milliseconds since the
	// last event against the minimum gap). Hours is the window of a
	// WindowCap.
	Reason Reason
	Dim    string
	Count  int64
	Limit  int64
	Hours  int
	// Degraded is set when the counts could not be read in time: the
	// decision is then the fail-open (or fail-closed) default.
	Degraded bool
	// Stale is set when Redis could not answer in time and the counter
	// decided on counts it last read, StaleMs ago at most
	// (COUNTER_STALE_MAX): a real decision, on slightly old counts.
	Stale   bool
	StaleMs int64
	// Declared is the declared cap that blocks, its Level among them
	// (DecideIDs and DecideCreatives only); Unknown says the campaign
	// declares nothing (allowed).
	Declared *DeclaredCap
	Unknown  bool
	// Reserved is how many in-flight bids the counts included
	// (Options.CountReserved).
	Reserved int64
}

func (d Decision) String() string {
	switch {
	case d.Allowed && d.Degraded:
		return d.CID + ": allowed (degraded)"
	case d.Allowed:
		return d.CID + ": allowed"
	case d.Reason == Unavailable:
		return d.CID + ": blocked, counts unavailable"
	case d.Reason == WindowCap:
		return fmt.Sprintf("%s: blocked by %s %dh on %s (%d of %d)", d.CID, d.Reason, d.Hours, d.Dim, d.Count, d.Limit)
	case d.Reason == PaceGap:
		return fmt.Sprintf("%s: blocked by %s on %s (%d ms since the last, gap %d ms)", d.CID, d.Reason, d.Dim, d.Count, d.Limit)
	default:
		return fmt.Sprintf("%s: blocked by %s on %s (%d of %d)", d.CID, d.Reason, d.Dim, d.Count, d.Limit)
	}
}

// ref ties a batch item back to its candidate and cap.
type ref struct{ cand, cap int }

// counted is what Decide read for one of its caps.
type counted struct {
	// failed: the counts could not be read (Redis did not answer in time
	// or refused the read); the candidate takes the default.
	failed bool
	stale  bool
	ageMs  int64
	day    int64
	// windows are the sums of the cap's Windows, in their order.
	windows []int64
	// pace is the exact window's state when the cap reads one.
	pace *counting.Pace
	// paceOf holds the state pace points to, when read in place.
	paceOf counting.Pace
}

// Decide reads the counts of every candidate in one round trip and returns
// one decision per candidate, in order. The decisions are always usable;
// the error says why some are degraded (nil when none is).
func (c *Client) Decide(ctx context.Context, ids Identities, cands []Candidate) ([]Decision, error) {
	out := make([]Decision, len(cands))
	for i, cand := range cands {
		out[i] = Decision{CID: cand.CID, Allowed: true}
	}
	refs := capRefs(ids, cands)
	if len(refs) == 0 {
		return out, nil
	}
	if !c.limiter.Allow() {
		c.degradeAll(out, refs)
		return out, ErrRateLimited
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// At most c.maxBatch counts a read, the parts all at once.
	got, err := splitCall(refs, c.maxBatch, func(part []ref) ([]counted, error) {
		return c.readCaps(ctx, ids, cands, part)
	})
	if err != nil {
		c.degradeAll(out, refs)
		return out, err
	}
	now := c.now().UnixMilli()
	var degraded int
	for k, r := range refs {
		d, g := &out[r.cand], &got[k]
		if g.failed {
			degraded++
			c.degrade(d)
			continue
		}
		if g.stale {
			d.Stale, d.StaleMs = true, max(d.StaleMs, g.ageMs)
		}
		if !d.Allowed {
			continue // an earlier cap already blocks
		}
		block(d, &cands[r.cand].Caps[r.cap], g, now)
	}
	if degraded > 0 {
		return out, fmt.Errorf("freqcap client: %d of %d counts degraded", degraded, len(refs))
	}
	return out, nil
}

// newCounted are zero counts of the caps refs name, each with room for
// its cap's windows, cut from one slice.
func newCounted(cands []Candidate, refs []ref) []counted {
	out, sums := make([]counted, len(refs)), make([]int64, capWindows(cands, refs))
	for k, r := range refs {
		n := len(cands[r.cand].Caps[r.cap].Windows)
		out[k].windows, sums = sums[:n:n], sums[n:]
	}
	return out
}

// capRefs are the counts Decide reads: one per cap on a dimension the
// request has an id for.
func capRefs(ids Identities, cands []Candidate) []ref {
	caps := 0
	for _, cand := range cands {
		caps += len(cand.Caps)
	}
	refs := make([]ref, 0, caps)
	for i, cand := range cands {
		for j, cp := range cand.Caps {
			if ids[cp.Dim] != "" {
				refs = append(refs, ref{i, j})
			}
		}
	}
	return refs
}

// capWindows is how many hour windows the caps refs name have in all.
func capWindows(cands []Candidate, refs []ref) int {
	n := 0
	for _, r := range refs {
		n += len(cands[r.cand].Caps[r.cap].Windows)
	}
	return n
}

// appendCapBody appends the body of the batch read of the caps refs name
// (an item per cap, capItem's), as encoding the items gives it, without
// building them.
func appendCapBody(b []byte, ids Identities, cands []Candidate, refs []ref) []byte {
	if b == nil {
		b = make([]byte, 0, 16+96*len(refs))
	}
	b = append(b, `{"items":[`...)
	for k, r := range refs {
		cand, cp := &cands[r.cand], &cands[r.cand].Caps[r.cap]
		if k > 0 {
			b = append(b, ',')
		}
		b = appendString(append(b, `{"cid":`...), cand.CID)
		if cand.Event != "" {
			b = appendString(append(b, `,"event":`...), cand.Event)
		}
		b = appendString(append(b, `,"dims":{`...), cp.Dim)
		b = append(appendString(append(b, ':'), ids[cp.Dim]), '}')
		if len(cp.Windows) > 0 {
			b = append(b, `,"windowHours":[`...)
			for i, w := range cp.Windows {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, int64(w.Hours), 10)
			}
			b = append(b, ']')
		}
		if cp.Pace != nil {
			if sec := int(cp.Pace.Window / time.Second); sec != 0 {
				b = strconv.AppendInt(append(b, `,"paceWindowSec":`...), int64(sec), 10)
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendString appends s as a JSON string: as it is when it needs no
// escape (printable ASCII but quotes and backslashes), else as the JSON
// encoder writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			q, _ := gojson.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// capItem is the batch item that reads cp's counts for cand.
func capItem(ids Identities, cand *Candidate, cp *Cap) counting.BatchItem {
	it := counting.BatchItem{CID: cand.CID, Event: cand.Event, Dims: map[string]string{cp.Dim: ids[cp.Dim]}}
	for _, w := range cp.Windows {
		it.WindowHours = append(it.WindowHours, w.Hours)
	}
	if cp.Pace != nil {
		it.PaceWindowSec = int(cp.Pace.Window / time.Second)
	}
	return it
}

// block applies one cap to the counts read for it, in the order day,
// windows, pace limit, pace gap.
func block(d *Decision, cp *Cap, got *counted, now int64) {
	stop := func(reason Reason, count, limit int64, hours int) {
		d.Allowed, d.Reason, d.Dim, d.Count, d.Limit, d.Hours = false, reason, cp.Dim, count, limit, hours
	}
	if cp.Day > 0 && got.day >= cp.Day {
		stop(DayCap, got.day, cp.Day, 0)
		return
	}
	for i, w := range cp.Windows {
		if n := got.windows[i]; w.Limit > 0 && n >= w.Limit {
			stop(WindowCap, n, w.Limit, w.Hours)
			return
		}
	}
	if cp.Pace == nil || got.pace == nil {
		return
	}
	if cp.Pace.Limit > 0 && got.pace.Count >= cp.Pace.Limit {
		stop(PaceLimit, got.pace.Count, cp.Pace.Limit, 0)
		return
	}
	if gap := cp.Pace.MinGap.Milliseconds(); gap > 0 && got.pace.LastAt > 0 && now-got.pace.LastAt < gap {
		stop(PaceGap, now-got.pace.LastAt, gap, 0)
	}
}

func (c *Client) degrade(d *Decision) {
	d.Degraded = true
	if c.failClosed {
		d.Allowed, d.Reason = false, Unavailable
	}
}

func (c *Client) degradeAll(out []Decision, refs []ref) {
	for _, r := range refs {
		c.degrade(&out[r.cand])
	}
}

// httpReader reads counts with POST /v1/freq/batch.
type httpReader struct {
	batchURL, decideURL, reserveURL string
	http                            *http.Client
}

// readCaps reads the caps refs name with POST /v1/freq/batch. The answer
// in the plain form the counter writes is read straight into the caps'
// counts (capAnswers); any other is decoded whole, as the other calls'.
func (h *httpReader) readCaps(ctx context.Context, ids Identities, cands []Candidate, refs []ref) ([]counted, error) {
	var out []counted
	err := h.exchange(ctx, h.batchURL, appendCapBody(nil, ids, cands, refs), func(status int, body []byte) error {
		var ok bool
		if status == http.StatusOK {
			if out, ok = capAnswers(body, cands, refs); ok {
				return nil
			}
		}
		answers, err := decodeResults[counting.Answer](status, body)
		if err == nil {
			out, err = countedOf(answers, cands, refs)
		}
		return err
	})
	return out, err
}

// countedOf are the counts of the caps refs name in the counter's
// answers to their items.
func countedOf(answers []counting.Answer, cands []Candidate, refs []ref) ([]counted, error) {
	if len(answers) != len(refs) {
		return nil, fmt.Errorf("freqcap client: %d results for %d items", len(answers), len(refs))
	}
	out := newCounted(cands, refs)
	for k, r := range refs {
		a, cp, g := &answers[k], &cands[r.cand].Caps[r.cap], &out[k]
		g.failed, g.stale, g.ageMs = a.Degraded || a.Code != 0, a.Stale, a.AgeMs
		got := a.Counts[cp.Dim]
		g.day, g.pace = got.Day, got.Pace
		for i, w := range cp.Windows {
			g.windows[i] = got.Windows[strconv.Itoa(w.Hours)]
		}
	}
	return out, nil
}

// results posts req to url and answers the results of the counter's
// {"code","msg","results"} answer; any other answer is an error.
func results[T any](ctx context.Context, h *httpReader, url string, req any) ([]T, error) {
	body, err := gojson.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out []T
	err = h.exchange(ctx, url, body, func(status int, body []byte) (err error) {
		out, err = decodeResults[T](status, body)
		return err
	})
	return out, err
}

// decodeResults are the results of the counter's {"code","msg","results"}
// answer body of status; any other answer is an error.
func decodeResults[T any](status int, body []byte) ([]T, error) {
	var resp struct {
		Code    int    `json:"code"`
		Msg     string `json:"msg"`
		Results []T    `json:"results"`
	}
	if err := gojson.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("freqcap client: %d answer: %w", status, err)
	}
	if status != http.StatusOK || resp.Code != 0 {
		return nil, fmt.Errorf("freqcap client: counter answered %d: code %d %s", status, resp.Code, resp.Msg)
	}
	return resp.Results, nil
}

// maxAnswer bounds the body of a counter's answer the client reads.
const maxAnswer = 64 << 20

// answerBufs hold the answers being read, for the next call once read.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// exchange posts body, a JSON request, to u and has read decode the
// status and body of the answer, whatever its status. The answer is read
// whole (so the connection is reusable) into a buffer the next exchange
// reuses: read must keep none of it.
func (h *httpReader) exchange(ctx context.Context, u string, body []byte, read func(status int, body []byte) error) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := h.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("freqcap client: %w", err)
	}
	defer hresp.Body.Close()
	buf := answerBufs.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			answerBufs.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(io.LimitReader(hresp.Body, maxAnswer)); err != nil {
		return fmt.Errorf("freqcap client: %d answer: %w", hresp.StatusCode, err)
	}
	return read(hresp.StatusCode, buf.Bytes())
}

// AuctionEID is the event id a bid response puts in its notice URLs: the
// exchange replaces the OpenRTB macros, so the win, billing and impression
// notices of one impression share an id, and resends of one notice count
// once.
const AuctionEID = "${AUCTION_ID}:${AUCTION_IMP_ID}"

// Notices are the URLs a bid response carries for one candidate.
type Notices struct {
	Win     string // OpenRTB nurl
	Billing string // OpenRTB burl
	Imp     string // impression pixel
	// Click and Conv are the suppression events: the click tracker (see
	// NoticeSigner.ClickThrough for one that sends the browser on) and the
	// conversion pixel (or server-to-server POST).
	Click string
	Conv  string
	// Loss is the OpenRTB lurl: it ends the bid's reservation (Reserve)
	// before its TTL; nothing is counted.
	Loss string
}

// NoticeURLs builds the notice URLs of callback at callbackURL
// (https://host) for campaign cid and the request's identities. The
// OpenRTB macros in eid are left for the exchange to substitute.
func NoticeURLs(callbackURL, cid string, ids Identities) Notices {
	base := strings.TrimRight(callbackURL, "/")
	dims := make([]string, 0, len(ids))
	for d := range ids {
		dims = append(dims, d)
	}
	sort.Strings(dims)
	var q strings.Builder
	q.WriteString("?cid=")
	q.WriteString(url.QueryEscape(cid))
	for _, d := range dims {
		if ids[d] == "" {
			continue
		}
		q.WriteString("&" + url.QueryEscape(d) + "=" + url.QueryEscape(ids[d]))
	}
	q.WriteString("&eid=" + AuctionEID)
	query := q.String()
	return Notices{Win: base + "/win" + query, Billing: base + "/billing" + query, Imp: base + "/imp" + query,
		Click: base + "/click" + query, Conv: base + "/conv" + query, Loss: base + "/loss" + query}
}

// NoticeSigner builds signed notice URLs, for a callback that verifies
// them (CALLBACK_SIGNING_KEYS): only what the bidder signed is counted.
type NoticeSigner struct {
	CallbackURL string // https://host of callback
	KeyID       string // the kid of Secret in CALLBACK_SIGNING_KEYS
	Secret      []byte // the key's raw bytes (CALLBACK_SIGNING_KEYS holds them in base64: decode it)
	// TTL is how long the URLs stay valid (their exp), at most callback's
	// CALLBACK_MAX_NOTICE_AGE for each event; 0 is DefaultNoticeTTL's.
	// callback takes each signed notice once until its exp.
	TTL time.Duration
	// NoReservations says this bidder never reserves its bids (Reserve):
	// the URLs carry rsv=0, signed, and callback then sends the counter no
	// release with a win (a release part costs Redis about a sixth of a
	// win's quiet write per dimension) and writes nothing for a loss. A
	// bidder that reserves leaves it false: its wins end their bids'
	// reservations.
	NoReservations bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// URLs signs the notice URLs of one candidate: campaign cid, the request's
// identities, and the event id from the bid request and imp ids the bidder
// knows (an exchange macro cannot be signed). Unsigned parameters for the
// exchange to substitute, such as "price=${AUCTION_PRICE}", may be
// appended after the URLs' sig.
func (s NoticeSigner) URLs(cid string, ids Identities, requestID, impID string) (Notices, error) {
	return s.CreativeURLs(cid, "", ids, requestID, impID)
}

// CreativeURLs is URLs for a bid that serves creative crid (none when
// empty): the creative is signed with the rest, and the notices count at
// the creative's level too.
func (s NoticeSigner) CreativeURLs(cid, crid string, ids Identities, requestID, impID string) (Notices, error) {
	url, err := s.signer(cid, crid, ids, requestID, impID, "")
	if err != nil {
		return Notices{}, err
	}
	return Notices{Win: url("win"), Billing: url("billing"), Imp: url("imp"), Click: url("click"), Conv: url("conv"), Loss: url("loss")}, nil
}

// ClickThrough is the signed click tracker of a bid that sends the
// browser on to landing (an http(s) URL, signed with the rest, so callback
// is no open redirect): callback counts the click, then answers 302.
func (s NoticeSigner) ClickThrough(cid, crid string, ids Identities, requestID, impID, landing string) (string, error) {
	if u, err := url.Parse(landing); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("freqcap client: the landing page %q is not an http(s) URL", landing)
	}
	url, err := s.signer(cid, crid, ids, requestID, impID, landing)
	if err != nil {
		return "", err
	}
	return url("click"), nil
}

// signer returns the signed URL of each event for one bid.
func (s NoticeSigner) signer(cid, crid string, ids Identities, requestID, impID, landing string) (func(event string) string, error) {
	if requestID == "" || impID == "" {
		return nil, fmt.Errorf("freqcap client: a signed notice needs the bid request id and imp id for its eid")
	}
	if s.KeyID == "" || len(s.Secret) == 0 {
		return nil, fmt.Errorf("freqcap client: NoticeSigner needs KeyID and Secret")
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	ps := []signing.Param{{Name: "cid", Value: cid}, {Name: "eid", Value: requestID + ":" + impID}}
	if crid != "" {
		ps = append(ps, signing.Param{Name: "crid", Value: crid})
	}
	if landing != "" {
		ps = append(ps, signing.Param{Name: "to", Value: landing})
	}
	if s.NoReservations {
		ps = append(ps, signing.Param{Name: "rsv", Value: "0"})
	}
	for d, id := range ids {
		if id != "" {
			ps = append(ps, signing.Param{Name: d, Value: id})
		}
	}
	base := strings.TrimRight(s.CallbackURL, "/")
	// Each URL is signed for its own event: a pixel URL counts no win.
	return func(event string) string {
		ttl := s.TTL
		if ttl <= 0 {
			ttl = DefaultNoticeTTL[event]
		}
		return base + "/" + event + "?" + signing.SignQuery(s.KeyID, s.Secret, now().Add(ttl), event, ps)
	}, nil
}

// DefaultNoticeTTL is how long NoticeSigner's URLs stay valid by event,
// callback's default CALLBACK_MAX_NOTICE_AGE: a win notice (nurl) comes
// at the auction's end, billing and impressions when the ad shows, which
// for a cached app ad may be hours later, a click within a day of the
// impression, a conversion within 30 days of the click.
var DefaultNoticeTTL = map[string]time.Duration{"win": 30 * time.Minute, "billing": 4 * time.Hour, "imp": 4 * time.Hour,
	"click": 24 * time.Hour, "conv": 30 * 24 * time.Hour, "loss": 30 * time.Minute}
