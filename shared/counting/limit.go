package counting

// The wire shapes of the rate-limit API: POST /v1/limit,
// /v1/limit/batch and the gate. A check names a policy from the counter's
// policy file, or gives its rule inline.

// Rule is one rate limit: Limit per Period with Algorithm.
type Rule struct {
	// Algorithm is fixed_window, sliding_log, sliding_window,
	// leaky_bucket, token_bucket or gcra.
	Algorithm Kind  `json:"algorithm"`
	Limit     int64 `json:"limit"`
	// Period is a Go duration ("1s", "1m", "24h"), whole milliseconds.
	Period string `json:"period"`
	// Burst is what a token_bucket stores or gcra admits at once (default
	// Limit); Capacity what a leaky_bucket queues (default Limit).
	Burst    int64 `json:"burst,omitempty"`
	Capacity int64 `json:"capacity,omitempty"`
	// Acquire makes a token_bucket reserve and answer delayMs instead of
	// refusing while an earlier reservation's wait runs.
	Acquire bool `json:"acquire,omitempty"`
}

// Modes of a check.
const (
	Enforce = "enforce" // refuse what the limits refuse (default)
	Shadow  = "shadow"  // admit everything, report what enforcing would do
)

// LimitRequest is one check of Cost against the limits of Key: those of
// the named Policy, or the inline Rule (or Limits, several decided all or
// nothing).
type LimitRequest struct {
	Key    string `json:"key"`
	Policy string `json:"policy,omitempty"`
	Rule
	Limits []Rule `json:"limits,omitempty"`
	// Cost is the hits to take; default 1, 0 peeks without consuming.
	Cost *int64 `json:"cost,omitempty"`
	// Mode is enforce or shadow; default the policy's, else enforce.
	Mode string `json:"mode,omitempty"`
}

// LimitAnswer answers a check, admitted or not (a refusal is an answer,
// not an error).
type LimitAnswer struct {
	Allowed bool `json:"allowed"`
	// Remaining is what the limits would still admit now (the smallest).
	Remaining int64 `json:"remaining"`
	// RetryAfterMs is 0 when admitted; refused, when the same check would
	// be admitted, or -1 when never (its cost is above what a limit holds).
	RetryAfterMs int64 `json:"retryAfterMs"`
	// ResetAfterMs is when every limit is back to its full allowance.
	ResetAfterMs int64 `json:"resetAfterMs"`
	// DelayMs is how long an admitted hit must wait for its turn
	// (leaky_bucket, token_bucket with acquire); 0 otherwise.
	DelayMs int64 `json:"delayMs"`
	// Shadowed: shadow mode admitted a hit that enforcing would refuse.
	Shadowed bool `json:"shadowed"`
	// Degraded: Redis could not decide in time and the check failed open
	// (admitted); Code and Msg say why.
	Degraded bool   `json:"degraded"`
	Code     int    `json:"code,omitempty"`
	Msg      string `json:"msg,omitempty"`
	// Limits is each limit's own answer when there are several.
	Limits []Decision `json:"limits,omitempty"`
}

// LimitBatch is several checks answered in order.
type LimitBatch struct {
	Checks []LimitRequest `json:"checks"`
}

// LimitBatchAnswer answers a LimitBatch; Code and Msg are the batch's own
// (one invalid check refuses the batch, and nothing is consumed).
type LimitBatchAnswer struct {
	Code    int           `json:"code"`
	Msg     string        `json:"msg,omitempty"`
	Results []LimitAnswer `json:"results"`
}

// Policy is a named set of limits in the counter's policy file.
type Policy struct {
	Name string `json:"name"`
	Rule
	Limits []Rule `json:"limits,omitempty"`
	Mode   string `json:"mode,omitempty"`
}

// PolicyFile is COUNTER_LIMITS_FILE, YAML or JSON.
type PolicyFile struct {
	Policies []Policy `json:"policies"`
}

// ViewRequest is one view of an article (POST /v1/views, the view
// counter): it counts toward the article's total only when the viewer is
// within the view limits.
type ViewRequest struct {
	Article string `json:"article"`
	Viewer  string `json:"viewer"`
}

// ViewAnswer says whether the view counted and the article's total.
type ViewAnswer struct {
	Counted bool  `json:"counted"`
	Total   int64 `json:"total"`
	// RetryAfterMs is 0 when counted; otherwise when a view of this viewer
	// would count again.
	RetryAfterMs int64 `json:"retryAfterMs"`
	// Limits is each view limit's answer: per viewer and article, then per
	// viewer, as configured.
	Limits []Decision `json:"limits"`
}
