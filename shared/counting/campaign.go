package counting

import "strconv"

// The wire types of the campaign endpoints (/v1/incr, /v1/freq,
// /v1/freq/batch, /v1/pace): views over items, one counter per dimension.

// Answer is the answer of /v1/incr and /v1/freq, and each result of
// /v1/freq/batch.
type Answer struct {
	Code  int    `json:"code"`
	Msg   string `json:"msg,omitempty"`
	CID   string `json:"cid"`
	Level string `json:"level,omitempty"`
	Event string `json:"event"`
	// WindowHours are the hour windows asked for, ascending; empty for none.
	WindowHours []int `json:"windowHours"`
	// PaceWindowSec is the exact window asked for, 0 for none.
	PaceWindowSec int `json:"paceWindowSec,omitempty"`
	// Counts holds one entry per dimension asked for.
	Counts map[string]Counts `json:"counts"`
	// Degraded is set on a read that Redis could not serve in time (counts
	// are then 0); reads always carry it.
	Degraded bool `json:"degraded,omitempty"`
	// Stale is set when some counts are last-known values, read AgeMs ago,
	// because Redis did not answer in time (COUNTER_STALE_MAX).
	Stale bool  `json:"stale,omitempty"`
	AgeMs int64 `json:"ageMs,omitempty"`
	// Duplicate is set on a write whose eid one of its counters had seen.
	Duplicate bool `json:"duplicate,omitempty"`
}

// Counts are one dimension's counters.
type Counts struct {
	// Day is today's count.
	Day int64 `json:"day"`
	// Windows is the sum of the hour buckets of each window asked for,
	// keyed by its hours ("3", "24").
	Windows map[string]int64 `json:"windows,omitempty"`
	// Pace is the exact window's state, when one was asked for.
	Pace *Pace `json:"pace,omitempty"`
	// Week and Month are this week's and this month's counts, when asked
	// for.
	Week  *int64 `json:"week,omitempty"`
	Month *int64 `json:"month,omitempty"`
	// Lifetime is the count since the first event, until the campaign's
	// end, when asked for.
	Lifetime *int64 `json:"lifetime,omitempty"`
	// Periods are the sums of this natural period and the n-1 before,
	// keyed "day:3", "week:4", "month:2", when asked for.
	Periods map[string]int64 `json:"periods,omitempty"`
}

// Period is "this natural period and the N-1 before": Unit day, week or
// month, N 2 or more. A write keeps N periods (the longest its caps
// read).
type Period struct {
	Unit string `json:"unit"`
	N    int    `json:"n"`
}

// Name is the period's key in Counts.Periods, "day:3".
func (p Period) Name() string { return p.Unit + ":" + strconv.Itoa(p.N) }

// Pace is the state of one exact sliding window.
type Pace struct {
	Count  int64 `json:"count"`
	LastAt int64 `json:"lastAt"` // unix ms of the newest event, 0 when none
}

// BatchItem is one item of POST /v1/freq/batch and /v1/incr/batch.
type BatchItem struct {
	// CID is the campaign; with Level, the id of its advertiser, io or
	// creative.
	CID           string            `json:"cid"`
	Level         string            `json:"level,omitempty"`
	Event         string            `json:"event,omitempty"`
	Dims          map[string]string `json:"dims"`
	WindowHours   []int             `json:"windowHours,omitempty"`
	PaceWindowSec int               `json:"paceWindowSec,omitempty"`
	// Week and Month count (and read) the natural week and calendar month
	// too.
	Week  bool `json:"week,omitempty"`
	Month bool `json:"month,omitempty"`
	// Zone is the IANA time zone of the natural day, week and month (the
	// counter's COUNTER_TIMEZONE when empty): the campaign's, or its
	// advertiser's.
	Zone string `json:"zone,omitempty"`
	// LifetimeEnd > 0 counts (and reads) the campaign's lifetime too,
	// until then (unix seconds).
	LifetimeEnd int64 `json:"lifetimeEnd,omitempty"`
	// Periods count (and read) this natural day, week or month and the
	// n-1 before (writes: one per unit, its n the periods kept).
	Periods []Period `json:"periods,omitempty"`
	// EID is the event id of a write (POST /v1/incr/batch); reads refuse it.
	EID string `json:"eid,omitempty"`
	// Release makes a write of the counter's first event (a win) end the
	// in-flight bid whose id is its EID (POST /v1/reserve), in the same run
	// as its count; Lost makes it only that (a loss notice), counting
	// nothing. callback sets Release on wins and Lost on losses.
	Release bool `json:"release,omitempty"`
	Lost    bool `json:"lost,omitempty"`
	// Levels count a write at other levels of its campaign too (callback
	// sends the advertiser, io and creative its campaigns' caps need), each
	// with the same event id, deduplicated per level. The answer's counts
	// are the item's own level's; it is a duplicate only when every level
	// had counted the event id.
	Levels []LevelCount `json:"levels,omitempty"`
}

// LevelCount is one more level a write counts at: the level's id, which
// of the item's dimensions, and the windows there.
type LevelCount struct {
	Level         string   `json:"level"`
	ID            string   `json:"id"`
	Dims          []string `json:"dims"`
	WindowHours   []int    `json:"windowHours,omitempty"`
	PaceWindowSec int      `json:"paceWindowSec,omitempty"`
	Week          bool     `json:"week,omitempty"`
	Month         bool     `json:"month,omitempty"`
	Zone          string   `json:"zone,omitempty"`
	LifetimeEnd   int64    `json:"lifetimeEnd,omitempty"`
	Periods       []Period `json:"periods,omitempty"`
	// Lost makes this level only end the in-flight bid (a win's, on the
	// dimensions the level counts nothing on), counting nothing.
	Lost bool `json:"lost,omitempty"`
}

// BatchRequest is the body of POST /v1/freq/batch.
type BatchRequest struct {
	Items []BatchItem `json:"items"`
	// Quiet (POST /v1/incr/batch) asks for each item's code and duplicate
	// only: no counts are computed or answered. callback's forwarding
	// reads no more.
	Quiet bool `json:"quiet,omitempty"`
}

// BatchResponse answers POST /v1/freq/batch: one Answer per item, in order.
type BatchResponse struct {
	Code    int      `json:"code"`
	Msg     string   `json:"msg"`
	Results []Answer `json:"results"`
}

// Pace outcomes of POST /v1/pace, as lua/sliding.lua returns them.
const (
	PaceAllowed   = 1
	PaceOverLimit = 0
	PaceTooSoon   = -1
)

// PaceAnswer answers POST /v1/pace.
type PaceAnswer struct {
	Code  int    `json:"code"`
	CID   string `json:"cid"`
	Event string `json:"event"`
	// Result is allowed, over_limit or too_soon: the first refusal in
	// dimension order; ResultCode is its PaceAllowed.. code.
	Result     string             `json:"result"`
	ResultCode int                `json:"resultCode"`
	Dims       map[string]PaceDim `json:"dims"`
	Duplicate  bool               `json:"duplicate,omitempty"`
}

// PaceDim is one dimension's outcome of POST /v1/pace.
type PaceDim struct {
	Result     string `json:"result"`
	ResultCode int    `json:"resultCode"`
	Count      int64  `json:"count"`
	LastAt     int64  `json:"lastAt"`
}

// Schema answers GET /v1/schema: what the counter counts, so that a writer
// (callback) takes its dimension names and limits from the one place that
// enforces them instead of a copy of its settings.
type Schema struct {
	Dimensions       []string `json:"dimensions"`
	Events           []string `json:"events"`
	MaxWindowHours   int      `json:"maxWindowHours"`
	MaxPaceWindowSec int      `json:"maxPaceWindowSec"`
	MaxBatch         int      `json:"maxBatch"`
	MaxReadBatch     int      `json:"maxReadBatch"`
	DedupeTTLSec     int      `json:"dedupeTtlSec"`
}

// Cap is one frequency cap a campaign declares: at most Limit events of
// one kind for one identity (a dimension's id) within a window, at one
// level of the campaign's hierarchy.
type Cap struct {
	// Level is whose events count: the campaign's own (campaign, the
	// default), every campaign's of its advertiser or io (shared by them),
	// or the candidate creative's.
	Level string `json:"level"`
	// Event is the counted event (COUNTER_EVENTS); the first when empty.
	Event string `json:"event"`
	// Dim is the identity counted (COUNTER_DIMENSIONS); the first when
	// empty.
	Dim    string    `json:"dim,omitempty"`
	Window CapWindow `json:"window"`
	Limit  int64     `json:"limit"`
	// Then is "block" for a suppression (after a click or a conversion,
	// the candidate is blocked for the window once Limit is reached): the
	// verdict's reason is then "suppressed", and it is named before any
	// frequency cap that also blocks. Empty for a frequency cap.
	Then string `json:"then,omitempty"`
}

// CapWindow is a cap's window: the natural day (unit day, n 1), the last
// n hours (unit hours), or an exact sliding window of n minutes or
// seconds (units minutes, seconds) with an optional minimum gap.
type CapWindow struct {
	Unit      string `json:"unit"`
	N         int    `json:"n"`
	MinGapSec int    `json:"minGapSec,omitempty"`
}

// DecideRequest is one bid request's question (POST /v1/decide): its
// identities by dimension and the candidate campaigns, whose declared
// caps the counter reads itself.
type DecideRequest struct {
	// Reserved adds the in-flight bids (POST /v1/reserve) to the counts
	// every cap compares with its limit.
	Reserved   bool              `json:"reserved,omitempty"`
	Identities map[string]string `json:"identities"`
	Candidates []Candidate       `json:"candidates"`
}

// Candidate is one campaign that could answer a bid request.
type Candidate struct {
	CID string `json:"cid"`
	// CRID is the creative the bid would serve: the campaign's creative
	// caps apply to it. Without it, creative caps do not apply.
	CRID string `json:"crid,omitempty"`
}

// Verdict answers one candidate: allowed, or the first declared cap that
// blocks it and the count that reached its limit (for a minimum gap, the
// milliseconds since the last event).
type Verdict struct {
	CID     string `json:"cid"`
	CRID    string `json:"crid,omitempty"`
	Allowed bool   `json:"allowed"`
	// Code is 0, 10002 for a campaign the counter does not know (allowed:
	// nothing declared), or the code of counts it could not read (the
	// verdict is then the fail-open default, Degraded).
	Code int    `json:"code"`
	Msg  string `json:"msg,omitempty"`
	Cap  *Cap   `json:"cap,omitempty"`
	// Reason is how Cap blocks: day_cap, window_cap (hours), pace_limit
	// (an exact window's count) or pace_gap (its minimum gap).
	Reason string `json:"reason,omitempty"`
	Count  int64  `json:"count,omitempty"`
	// Degraded: some counts could not be read in time; Stale: some were
	// last-known values, AgeMs old at most.
	Degraded bool  `json:"degraded,omitempty"`
	Stale    bool  `json:"stale,omitempty"`
	AgeMs    int64 `json:"ageMs,omitempty"`
	// Reserved is the most in-flight bids added to a count it compared
	// (DecideRequest.Reserved).
	Reserved int64 `json:"reserved,omitempty"`
}

// ReserveRequest holds in-flight bids (POST /v1/reserve): the bid id
// Bid (its notices' eid) reserved on every counter the candidates' caps
// read for these identities, for TTLMs (the counter's
// COUNTER_RESERVE_TTL when 0), until its win counts it, its loss or the
// TTL releases it. A decide with Reserved counts it meanwhile.
type ReserveRequest struct {
	Identities map[string]string `json:"identities"`
	Candidates []Candidate       `json:"candidates"`
	Bid        string            `json:"bid"`
	TTLMs      int64             `json:"ttlMs,omitempty"`
}

// ReserveAnswer answers one candidate of a ReserveRequest: Counters is
// how many counters now hold the bid (0 for a campaign that declares
// nothing, or caps none of these identities); Code is Redis's failure.
type ReserveAnswer struct {
	CID      string `json:"cid"`
	Code     int    `json:"code"`
	Msg      string `json:"msg,omitempty"`
	Counters int    `json:"counters"`
}

// ReserveResponse answers a ReserveRequest, one answer per candidate.
type ReserveResponse struct {
	Code    int             `json:"code"`
	Msg     string          `json:"msg"`
	Results []ReserveAnswer `json:"results"`
}

// DecideResponse answers a DecideRequest, one verdict per candidate in
// order.
type DecideResponse struct {
	Code    int       `json:"code"`
	Msg     string    `json:"msg"`
	Results []Verdict `json:"results"`
}
