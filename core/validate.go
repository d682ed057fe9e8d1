package core

import (
	"slices"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// MaxHits bounds the hits (the cost) of one item; maxLimit a limit.
const (
	MaxHits  = 1_000_000
	maxLimit = 1_000_000
)

// Limits bound what an item may ask for, and name what a campaign counts.
type Limits struct {
	Dimensions []string // a campaign counter's dimensions (COUNTER_DIMENSIONS)
	Events     []string // its events, the first the default (COUNTER_EVENTS)
	MaxHours   int      // hours an hour hash keeps (COUNTER_MAX_WINDOW_HOURS)
	MaxSliding int      // longest exact window, seconds (COUNTER_MAX_PACE_WINDOW_SEC)
	MaxSeconds int      // longest seconds window (COUNTER_MAX_SPAN_SEC)
	MaxDays    int      // longest day window (COUNTER_MAX_SPAN_DAYS)
}

// withDefaults fills l's zero fields from Defaults.
func (l Limits) withDefaults() Limits {
	d := Defaults.Limits
	if len(l.Dimensions) == 0 {
		l.Dimensions = d.Dimensions
	}
	if len(l.Events) == 0 {
		l.Events = d.Events
	}
	for _, f := range []struct {
		v   *int
		def int
	}{{&l.MaxHours, d.MaxHours}, {&l.MaxSliding, d.MaxSliding}, {&l.MaxSeconds, d.MaxSeconds}, {&l.MaxDays, d.MaxDays}} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
	return l
}

// Check validates one item and fills in the default event; a write (Hits
// > 0) or read is decided by the caller, who passes write. field prefixes
// the field names of errors (e.g. "items[3].").
func (s *Store) Check(it *counting.Item, write bool, field string) error {
	return s.limits.Check(it, write, field)
}

// checkLimiter validates a rate limiter's item: a check, never a read.
func (l *Limits) checkLimiter(k limiterKind, it *counting.Item, write bool, field string) error {
	if err := limiterScope(it, field); err != nil {
		return err
	}
	switch {
	case !write:
		return apierr.Invalid("%sspec.kind: %s", field, errLimiterRead)
	case it.Hits < 0 || it.Hits > MaxHits:
		return apierr.Invalid("%scost must be between 0 and %d", field, MaxHits)
	}
	return k.check(it, l, field)
}

// Check validates one item as Store.Check does.
func (l *Limits) Check(it *counting.Item, write bool, field string) error {
	sc := &it.Scope
	if k, ok := kindOf(it.Spec.Kind).(limiterKind); ok {
		return l.checkLimiter(k, it, write, field)
	}
	switch {
	case sc.Policy != "":
		return apierr.Invalid("%sscope.policy is for rate limiter kinds", field)
	case sc.Campaign != "" && sc.Business != 0:
		return apierr.Invalid("%sscope: give campaign or business, not both", field)
	case sc.Campaign != "":
		if err := l.checkCampaign(it, field); err != nil {
			return err
		}
	case sc.Business != 0:
		if sc.Event != "" || sc.Level != "" || it.Subject.Dim != "" {
			return apierr.Invalid("%sscope.event, scope.level and subject.dim belong to campaign counters, not business keys", field)
		}
		if !ids.ValidKey(it.Subject.ID) {
			return apierr.Invalid("%ssubject.id (the key) must be %s", field, ids.KeyRule)
		}
	default:
		return apierr.Invalid("%sscope: campaign or business is required", field)
	}
	k := kindOf(it.Spec.Kind)
	if k == nil {
		return apierr.Invalid("%sspec.kind must be one of %v", field, kindNames())
	}
	switch {
	case write && (it.Hits < 1 || it.Hits > MaxHits):
		return apierr.Invalid("%shits must be between 1 and %d on a write", field, MaxHits)
	case !write && it.Hits != 0:
		return apierr.Invalid("%shits must be 0 on a read", field)
	case !write && it.EventID != "":
		return apierr.Invalid("%seventId is only accepted on writes", field)
	case !write && it.Quiet:
		return apierr.Invalid("%squiet is only accepted on writes", field)
	case it.EventID != "" && !ids.ValidID(it.EventID):
		return apierr.Invalid("%seventId must be %s", field, ids.IDRule)
	}
	if err := checkZone(k, it, field); err != nil {
		return err
	}
	return k.check(it, l, field)
}

// checkCampaign validates the scope and subject of a campaign's (or a
// level's) counter; the event defaults to the first.
func (l *Limits) checkCampaign(it *counting.Item, field string) error {
	sc := &it.Scope
	if !ids.ValidCID(sc.Campaign) {
		return apierr.Invalid("%sscope.campaign must be %s", field, ids.CIDRule)
	}
	if err := CheckLevel(&sc.Level, field+"scope.level"); err != nil {
		return err
	}
	if sc.Event == "" {
		sc.Event = l.Events[0]
	}
	switch {
	case !slices.Contains(l.Events, sc.Event):
		return apierr.Invalid("%sscope.event must be one of %v", field, l.Events)
	case !slices.Contains(l.Dimensions, it.Subject.Dim):
		return apierr.Invalid("%ssubject.dim must be one of %v", field, l.Dimensions)
	case !ids.ValidID(it.Subject.ID):
		return apierr.Invalid("%ssubject.id must be %s", field, ids.IDRule)
	}
	return nil
}

// checkZone validates an item's zone: a known one, for a kind of natural
// periods.
func checkZone(k kind, it *counting.Item, field string) error {
	if it.Spec.Zone == "" {
		return nil
	}
	if z, ok := k.(interface{ zoned() bool }); !ok || !z.zoned() {
		return apierr.Invalid("%sspec.zone is for natural periods (day, week, month, days, weeks, months)", field)
	}
	if _, err := LoadZone(it.Spec.Zone); err != nil {
		return apierr.Invalid("%sspec.zone: %v", field, err)
	}
	return nil
}

// kindNames lists the kinds, sorted, for error messages.
func kindNames() []counting.Kind {
	names := make([]counting.Kind, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// Limits is what the store's items are checked against.
func (s *Store) Limits() *Limits { return &s.limits }

// IsLimiter reports whether k is a rate limiter kind.
func IsLimiter(k counting.Kind) bool {
	_, ok := kindOf(k).(limiterKind)
	return ok
}

// Limiters are the rate limiter kinds, sorted.
func Limiters() []counting.Kind {
	var out []counting.Kind
	for _, k := range kindNames() {
		if IsLimiter(k) {
			out = append(out, k)
		}
	}
	return out
}

// CheckLevel validates a counter's level, making the campaign's own level
// "" (its keys are the campaign's). field names it in the error.
func CheckLevel(level *string, field string) error {
	switch *level {
	case "", counting.LevelCampaign:
		*level = ""
	case counting.LevelAdvertiser, counting.LevelIO, counting.LevelCreative:
	default:
		return apierr.Invalid("%s must be one of %v", field, counting.Levels)
	}
	return nil
}
