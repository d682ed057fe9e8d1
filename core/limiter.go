package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// limiterKind is what the rate limiters share: validation, the
// key rl:{p:<policy>:<key>}:<kind>:<limit>:<periodMs>[:<param>][<suffix>],
// one function call for a check against all the item's limits (limit.lua
// in the library, lua.Library, with every kind's function), and the
// decoding of its answer. Each kind's own file gives its name, its
// parameter and its own argument.
//
// The clock is the counter's, as for every kind: tests inject it, natural
// days are computed in COUNTER_TIMEZONE, and counter instances kept in step
// by NTP differ by milliseconds, which keys absorb by living limitGraceMs
// past the instant they stop mattering. Redis's TIME would give each
// Cluster shard and each failover its own clock, and cannot place a
// natural day.
type limiterKind struct {
	name counting.Kind
	// param is the kind's parameter (burst, capacity), 0 when none; it is
	// part of the key.
	param func(s *counting.Spec) int64
	// args appends the kind's own arguments to dst, in the order its Lua
	// function reads them, after those every shaping kind is sent (the
	// interval and param: limitKeysArgs), and gives the kind's key suffix
	// ("" when none); nil when it has none.
	args func(dst []string, s *counting.Spec, e *env) (_ []string, suffix string)
	// takes names the spec's options the kind takes (burst, capacity,
	// acquire); the others must be zero.
	takes option
	// shaping kinds let one unit pass every period/limit, so that
	// interval must be at least 1 us.
	shaping bool
	// maxLimit bounds Limit below the general bound (0: none).
	maxLimit int64
}

// option is a set of a limiter spec's optional fields.
type option uint8

const (
	takesBurst option = 1 << iota
	takesCapacity
	takesAcquire
)

// optionNames are the options by spec field.
var optionNames = map[option]string{takesBurst: "burst", takesCapacity: "capacity", takesAcquire: "acquire"}

// takers are the limiter kinds that take o, for error messages.
func takers(o option) string {
	var names []string
	for _, k := range Limiters() {
		if kindOf(k).(limiterKind).takes&o != 0 {
			names = append(names, string(k))
		}
	}
	return strings.Join(names, " and ")
}

const (
	// MaxPeriodMs bounds a limiter's period: 30 days.
	MaxPeriodMs = 30 * 24 * 3600 * 1000
	// MaxLimits bounds the limits of one check.
	MaxLimits = 8
	// limitGraceMs is how long a limiter's key outlives its last use
	// (limit.lua's grace).
	limitGraceMs = 1000
)

func (k limiterKind) check(it *counting.Item, lim *Limits, field string) error {
	if len(it.Spec.Also)+1 > MaxLimits {
		return apierr.Invalid("%slimits: at most %d", field, MaxLimits)
	}
	seen := map[string]bool{}
	for i, s := range specs(it) {
		f := field
		if len(it.Spec.Also) > 0 {
			f = fmt.Sprintf("%slimits[%d].", field, i)
		}
		if i > 0 {
			lk, ok := kindOf(s.Kind).(limiterKind)
			if !ok {
				return apierr.Invalid("%salgorithm: %q is not a rate limiter", f, s.Kind)
			}
			if len(s.Also) > 0 || s.Shadow {
				return apierr.Invalid("%slimits: a limit holds no limits or mode of its own", f)
			}
			k = lk
		}
		if err := k.checkSpec(s, lim, f); err != nil {
			return err
		}
		key := k.key(it, s, "")
		if seen[key] {
			return apierr.Invalid("%slimits: the same limit twice", f)
		}
		seen[key] = true
	}
	if it.EventID != "" {
		return apierr.Invalid("%seventId is not for rate limiters", field)
	}
	return nil
}

func (k limiterKind) checkSpec(s *counting.Spec, lim *Limits, field string) error {
	switch {
	case s.Limit < 1 || s.Limit > maxLimit:
		return apierr.Invalid("%slimit must be between 1 and %d", field, maxLimit)
	case k.maxLimit > 0 && s.Limit > k.maxLimit:
		return apierr.Invalid("%slimit of a %s must be at most %d", field, k.name, k.maxLimit)
	case s.PeriodMs < 1 || s.PeriodMs > MaxPeriodMs:
		return apierr.Invalid("%speriod must be between 1ms and 720h", field)
	case s.Burst < 0 || s.Burst > maxLimit:
		return apierr.Invalid("%sburst must be between 0 and %d", field, maxLimit)
	case s.Capacity < 0 || s.Capacity > maxLimit:
		return apierr.Invalid("%scapacity must be between 0 and %d", field, maxLimit)
	case s.Span != 0 || s.MinGapSec != 0:
		return apierr.Invalid("%sspan and minGapSec are not for rate limiters", field)
	case k.shaping && s.PeriodMs*1000 < s.Limit:
		return apierr.Invalid("%slimit per period must leave at least 1us between two units", field)
	}
	for o, set := range map[option]bool{takesBurst: s.Burst > 0, takesCapacity: s.Capacity > 0, takesAcquire: s.Acquire} {
		if set && k.takes&o == 0 {
			return apierr.Invalid("%s%s is for %s", field, optionNames[o], takers(o))
		}
	}
	return nil
}

// limiterScope checks the scope and subject of a limiter item.
func limiterScope(it *counting.Item, field string) error {
	switch {
	case it.Scope.Campaign != "" || it.Scope.Level != "" || it.Scope.Business != 0 || it.Scope.Event != "" || it.Subject.Dim != "":
		return apierr.Invalid("%sscope: a rate limiter takes a policy and a key only", field)
	case !ids.ValidCID(it.Scope.Policy):
		return apierr.Invalid("%spolicy must be %s", field, ids.CIDRule)
	case !ids.ValidKey(it.Subject.ID):
		return apierr.Invalid("%skey must be %s", field, ids.KeyRule)
	}
	return nil
}

// specs is the item's limits: its spec, then Spec.Also.
func specs(it *counting.Item) []*counting.Spec {
	out := make([]*counting.Spec, 0, 1+len(it.Spec.Also))
	out = append(out, &it.Spec)
	for i := range it.Spec.Also {
		out = append(out, &it.Spec.Also[i])
	}
	return out
}

func (k limiterKind) key(it *counting.Item, s *counting.Spec, suffix string) string {
	key := Tagged("rl:", it) + ":" + string(k.name) + ":" + strconv.FormatInt(s.Limit, 10) + ":" + strconv.FormatInt(s.PeriodMs, 10)
	if k.param != nil {
		key += ":" + strconv.FormatInt(k.param(s), 10)
	}
	return key + suffix
}

func (limiterKind) write(it *counting.Item, e *env) writing {
	keys, args := limitKeysArgs(it, e, "")
	return writing{fn: limitFunction, keys: keys, args: args}
}

// limitKeysArgs is the keys and arguments of lua/limit.lua for the item's
// limits; sub, when set, is appended to the key of the first limit (a
// limit per (key, sub) in the key's hash tag).
func limitKeysArgs(it *counting.Item, e *env, sub string) ([]string, []string) {
	ss := specs(it)
	keys := make([]string, 0, len(ss)+1)
	args := make([]string, 0, 2+4*len(ss))
	args = append(args, strconv.FormatInt(e.now.UnixMilli(), 10), strconv.FormatInt(it.Hits, 10))
	for i, s := range ss {
		k := kindOf(s.Kind).(limiterKind)
		var suffix string
		args = append(args, string(k.name))
		if k.shaping {
			// The microseconds between two units (period/limit, rounded
			// down: at least 1, checked) and the burst or capacity.
			args = append(args, strconv.FormatInt(s.PeriodMs*1000/s.Limit, 10), strconv.FormatInt(k.param(s), 10))
		}
		if k.args != nil {
			args, suffix = k.args(args, s, e)
		}
		if i == 0 && sub != "" {
			suffix += ":" + Escape(sub)
		}
		keys = append(keys, k.key(it, s, suffix))
	}
	return keys, args
}

// limitAndPeriod are the arguments of a kind that computes with its limit
// and period (ms).
func limitAndPeriod(dst []string, s *counting.Spec) []string {
	return append(dst, strconv.FormatInt(s.Limit, 10), strconv.FormatInt(s.PeriodMs, 10))
}

// usToMs rounds microseconds up to milliseconds; -1 (never) stays.
func usToMs(us int64) int64 {
	if us < 0 {
		return -1
	}
	return (us + 999) / 1000
}

// wrote combines the limits' answers: admitted when all admit; then the
// smallest remaining, the longest delay and reset; refused, the longest
// retry (-1 when any limit can never admit the cost). Each limit only
// gains room as time passes, so after the longest retry all admit.
func (limiterKind) wrote(it *counting.Item, _ *env, v []int64, r *counting.Result) error {
	n := 1 + len(it.Spec.Also)
	if len(v) != 5*n && len(v) != 5*n+1 {
		return fmt.Errorf("limit script returned %d values for %d limits", len(v), n)
	}
	// Admitted when every limit admits (one that refuses says 0; the others
	// then answer as a peek, which admits).
	r.Allowed = true
	ds := make([]counting.Decision, n)
	for i := range ds {
		a := v[5*i:]
		d := counting.Decision{Allowed: a[0] == 1, Remaining: max(a[1], 0), RetryAfterMs: usToMs(a[2]), ResetAfterMs: usToMs(a[3]), DelayMs: usToMs(a[4])}
		ds[i] = d
		r.Allowed = r.Allowed && d.Allowed
		if i == 0 || d.Remaining < r.Remaining {
			r.Remaining = d.Remaining
		}
		r.ResetAfterMs, r.DelayMs = max(r.ResetAfterMs, d.ResetAfterMs), max(r.DelayMs, d.DelayMs)
		switch {
		case d.Allowed:
		case d.RetryAfterMs < 0 || r.RetryAfterMs < 0:
			r.RetryAfterMs = -1
		default:
			r.RetryAfterMs = max(r.RetryAfterMs, d.RetryAfterMs)
		}
	}
	if n > 1 {
		r.Limits = ds
	}
	if !r.Allowed {
		r.Reason = counting.OverLimit
		r.DelayMs = 0
		if it.Spec.Shadow {
			r.Allowed, r.Shadowed = true, true
		}
	}
	return nil
}

var errLimiterRead = errors.New("rate limiters are checked, not read: peek with cost 0")

func (limiterKind) read(*counting.Item, *env) ([]rueidis.Cacheable, bool) { return nil, false }

func (limiterKind) got(*counting.Item, *env, []rueidis.RedisResult, *counting.Result) error {
	return errLimiterRead
}

// burstOrLimit is a burst or capacity, Limit when 0.
func burstOrLimit(v, limit int64) int64 {
	if v > 0 {
		return v
	}
	return limit
}
