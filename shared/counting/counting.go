// Package counting is freqcap's one counting contract: every counter, cap
// and limiter is an Item (a scope, a subject, a spec, hits and an optional
// event id), and every answer is a Result. The counter serves it, and the
// Go client, callback and bench speak it; no other copy of these types
// exists. Every field has one JSON shape.
package counting

// Kind names a kind of counter. Each kind says the unit of Spec.Span.
type Kind string

// The kinds of counter.
const (
	// Day counts natural days in the counter's time zone: a String with a
	// TTL, opened by the first hit and ending at the end of the Span-th day
	// counting today. Campaign counters take Span 1 (today).
	Day Kind = "day"
	// Week and Month count a campaign's natural week (Monday to Sunday)
	// and calendar month in the counter's time zone: a String with a TTL to
	// the period's end, opened by the first hit. Span 1 (this one).
	Week  Kind = "week"
	Month Kind = "month"
	// Days, Weeks and Months count this natural period and the Span-1
	// before it, in the item's zone: a Hash of period buckets (field = the
	// period's index), keeping Keep periods (at least Span).
	Days   Kind = "days"
	Weeks  Kind = "weeks"
	Months Kind = "months"
	// Reserve holds in-flight bids of a counter (its tag): a hit reserves
	// the bid whose id is the item's EventID for Span milliseconds, a read
	// answers how many are live. Release (a hit) ends the bid EventID: in
	// the same write as its win, the reservation becomes the count exactly
	// once.
	Reserve Kind = "reserve"
	Release Kind = "release"
	// Lifetime counts a campaign's events until its end: a String with a
	// TTL to the end, opened by the first hit; Span is the end in unix
	// seconds.
	Lifetime Kind = "lifetime"
	// Seconds counts in a window of Span seconds opened by the first hit
	// (a String with a TTL, the frequency-control API's TIME_UNIT_SEC). It shares its key
	// with Day: a business key has one live window whatever its unit.
	Seconds Kind = "seconds"
	// Hours counts the last Span hours from hour buckets (a Hash, field =
	// epoch hour). Every writer keeps the counter's configured largest
	// window, so a read never sees less than it asks for.
	Hours Kind = "hours"
	// Sliding is an exact sliding window of Span seconds (a ZSet, one
	// member per event id). With a Limit, a hit is admitted only while the
	// window holds fewer than Limit events and the newest is at least
	// MinGapSec old; without one, every hit is recorded.
	Sliding Kind = "sliding"

	// The rate limiters. Each decides a hit of Hits (the cost;
	// 0 peeks without consuming) against Limit per PeriodMs, atomically in
	// one script; a refused hit never consumes.

	// FixedWindow admits Limit per period, windows aligned to the epoch: a
	// burst of 2*Limit across a window edge is possible, as with any fixed window.
	FixedWindow Kind = "fixed_window"
	// SlidingLog is exact: one member per admitted unit of cost in the last
	// period (a list of timestamps).
	SlidingLog Kind = "sliding_log"
	// SlidingWindow approximates the log from the current and the previous
	// fixed window, the previous weighted by how much of it the sliding
	// period still covers.
	SlidingWindow Kind = "sliding_window"
	// LeakyBucket is a queue leaving at Limit per period: a hit is admitted
	// with the DelayMs it must wait for its turn, or refused when Capacity
	// units are already queued.
	LeakyBucket Kind = "leaky_bucket"
	// TokenBucket is Guava's RateLimiter, computed lazily: Burst permits
	// stored at most, refilled at Limit per period on access. A hit may
	// take more than is stored (the next caller waits). Without Acquire it
	// is refused while an earlier hit's wait is still running.
	TokenBucket Kind = "token_bucket"
	// GCRA is the generic cell rate algorithm (redis-cell, redis_rate):
	// Limit per period with Burst admitted at once.
	GCRA Kind = "gcra"
)

// Scope is whom a counter belongs to: a campaign's event, a
// business (frequency control) or a rate-limit policy. Exactly one of
// Campaign, Business and Policy is set.
type Scope struct {
	// Campaign is a campaign (line item, ...) id: 1-64 of [A-Za-z0-9._-];
	// with Level, the id of the campaign's advertiser, io or creative.
	Campaign string `json:"campaign,omitempty"`
	// Level is whose id Campaign is: empty (or LevelCampaign) for a
	// campaign, LevelAdvertiser, LevelIO or LevelCreative. Each level's
	// counters are their own: an advertiser's are shared by its campaigns.
	Level string `json:"level,omitempty"`
	// Event is the campaign's counted event (win, billing, imp); empty
	// means the counter's default event. Only with Campaign.
	Event string `json:"event,omitempty"`
	// Business is a frequency-control business id, > 0.
	Business uint32 `json:"business,omitempty"`
	// Policy is a rate limiter's policy name; with a limiter
	// kind only, and then the only field set.
	Policy string `json:"policy,omitempty"`
}

// The levels of a campaign's hierarchy: what a notice counts at, and
// what a declared cap caps.
const (
	LevelAdvertiser = "advertiser"
	LevelIO         = "io"
	LevelCampaign   = "campaign"
	LevelCreative   = "creative"
)

// Levels are the levels, widest first.
var Levels = []string{LevelAdvertiser, LevelIO, LevelCampaign, LevelCreative}

// Subject is what is counted within a scope.
type Subject struct {
	// Dim is the dimension (device, bundle, tagid) of a campaign counter;
	// empty for a business key.
	Dim string `json:"dim,omitempty"`
	// ID is the dimension's id, or the business's key.
	ID string `json:"id"`
}

// Spec is the kind of a counter and its span, and for deciding kinds the
// limit that admits or refuses a hit.
type Spec struct {
	Kind Kind `json:"kind"`
	// Span is the window in the kind's unit: days for Day, hours for Hours,
	// seconds for Seconds and Sliding. A read of a Day or Seconds counter
	// may leave it 0: it reads whatever window is live.
	Span int64 `json:"span"`
	// Zone is the IANA time zone (Europe/Paris) of a Day, Week or Month
	// counter's natural periods; the counter's COUNTER_TIMEZONE when empty.
	Zone string `json:"zone,omitempty"`
	// Limit is how many events a Sliding window admits; 0 records every hit
	// without deciding.
	Limit int64 `json:"limit,omitempty"`
	// MinGapSec is the shortest time between two admitted events of a
	// Sliding window with a Limit; 0 is none.
	MinGapSec int64 `json:"minGapSec,omitempty"`
	// PeriodMs is a rate limiter's period: Limit per PeriodMs.
	PeriodMs int64 `json:"periodMs,omitempty"`
	// Burst is how many a TokenBucket stores or GCRA admits at once;
	// 0 means Limit.
	Burst int64 `json:"burst,omitempty"`
	// Capacity is how many units a LeakyBucket queues; 0 means Limit.
	Capacity int64 `json:"capacity,omitempty"`
	// Keep is how many periods a write of Days, Weeks or Months keeps (the
	// longest its caps read); Span when smaller.
	Keep int64 `json:"keep,omitempty"`
	// Acquire makes a TokenBucket reserve and answer DelayMs instead of
	// refusing while an earlier wait runs.
	Acquire bool `json:"acquire,omitempty"`
	// Shadow makes a limiter allow every hit while it reports (Shadowed)
	// what enforcing would have done; a hit enforcing would refuse
	// consumes nothing.
	Shadow bool `json:"shadow,omitempty"`
	// Also holds further limits on the same key, decided with this one all
	// or nothing ("10 per second and 1,000 per hour"): a hit consumes only
	// when every limit admits it. Rate limiters only; their Shadow is the
	// outer spec's.
	Also []Spec `json:"also,omitempty"`
}

// Item is one counter and what to do with it: Hits > 0 counts, 0 reads.
type Item struct {
	Scope   Scope   `json:"scope"`
	Subject Subject `json:"subject"`
	Spec    Spec    `json:"spec"`
	// Hits is how many events to count; 0 reads without counting. Sliding
	// windows take 0 or 1.
	Hits int64 `json:"hits"`
	// EventID makes a write idempotent: a replay of the same id on the same
	// counter changes nothing and answers Duplicate. Writes only.
	EventID string `json:"eventId,omitempty"`
	// Quiet makes a write answer its code and Duplicate only: the sums of
	// hour and period buckets are not computed (Count is 0). Writes only.
	Quiet bool `json:"quiet,omitempty"`
}

// Reason says why a deciding kind refused a hit.
type Reason string

// Reasons of a refusal.
const (
	OverLimit Reason = "over_limit" // the window holds Limit events, or a limiter is spent
	TooSoon   Reason = "too_soon"   // the newest event is younger than MinGapSec
)

// Result is the answer for one item, in the item's place.
type Result struct {
	// Code is 0, or the item's own failure: 10001 timeout, 10002 key not
	// found (a Day or Seconds read of a counter with no live window), 10004
	// Redis unavailable.
	Code int    `json:"code"`
	Msg  string `json:"msg,omitempty"`
	// Count is the counter's value after the hits (reads: now).
	Count int64 `json:"count"`
	// TTLMs is how long the live window has left, in milliseconds: Day and
	// Seconds counters; 0 when no window is live.
	TTLMs int64 `json:"ttlMs"`
	// LastAt is the unix millisecond of the newest event of a Sliding
	// window, 0 when it holds none.
	LastAt int64 `json:"lastAt"`
	// Allowed is false only when a deciding kind refused the hit; Reason
	// says why. A refused hit counts nothing.
	Allowed bool   `json:"allowed"`
	Reason  Reason `json:"reason,omitempty"`
	// Duplicate is set when EventID was counted on this counter before:
	// nothing changed, and the counts are the current ones.
	Duplicate bool `json:"duplicate"`
	// Degraded is set on a read that Redis could not serve in time: the
	// counts are 0 and Code says why (fail open is the caller's decision).
	Degraded bool `json:"degraded"`
	// Stale is set on a read that Redis could not serve in time, answered
	// with the value last read AgeMs ago (within COUNTER_STALE_MAX); Code
	// is then 0.
	Stale bool  `json:"stale,omitempty"`
	AgeMs int64 `json:"ageMs,omitempty"`
	// Remaining is what a rate limiter would still admit now.
	Remaining int64 `json:"remaining,omitempty"`
	// RetryAfterMs is, for a refused hit, when the same hit would be
	// admitted (-1: never, its cost is above what the limiter holds); 0
	// when admitted.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// ResetAfterMs is when the limiter is back to its full allowance.
	ResetAfterMs int64 `json:"resetAfterMs,omitempty"`
	// DelayMs is how long an admitted hit of a shaping kind (LeakyBucket,
	// TokenBucket with Acquire) must wait for its turn.
	DelayMs int64 `json:"delayMs,omitempty"`
	// Shadowed is set in shadow mode when enforcing would have refused.
	Shadowed bool `json:"shadowed,omitempty"`
	// Limits is each limit's own answer, in the order of Spec and then
	// Spec.Also, when there are several; the fields above combine them.
	Limits []Decision `json:"limits,omitempty"`
}

// Decision is one rate limit's answer to a hit.
type Decision struct {
	Allowed      bool  `json:"allowed"`
	Remaining    int64 `json:"remaining"`
	RetryAfterMs int64 `json:"retryAfterMs"`
	ResetAfterMs int64 `json:"resetAfterMs"`
	DelayMs      int64 `json:"delayMs"`
}

// Request is a batch of items: all reads or all writes.
type Request struct {
	Items []Item `json:"items"`
}

// Response answers a Request: one Result per item, in order. Code and Msg
// are the batch's own: 0, or why the whole batch was refused (then Results
// is empty and nothing was written).
type Response struct {
	Code    int      `json:"code"`
	Msg     string   `json:"msg,omitempty"`
	Results []Result `json:"results"`
}
