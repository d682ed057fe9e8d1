package main

import (
	"slices"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// maxHits bounds the hits of one item.
const maxHits = 1_000_000

func newLimits(s Settings) *limits {
	return &limits{
		dims:       s.Dimensions,
		events:     s.Events,
		maxHours:   s.MaxWindowHours,
		maxSliding: s.MaxPaceWindowSec,
		maxSeconds: s.MaxSpanSec,
		maxDays:    s.MaxSpanDays,
		maxHits:    maxHits,
		maxLimit:   1_000_000,
	}
}

// checkItem validates one item and fills in the default event; a write
// (Hits > 0) or read is decided by the caller, who passes write. field
// prefixes the field names of errors (e.g. "items[3].").
func (l *limits) checkItem(it *counting.Item, write bool, field string) error {
	sc := &it.Scope
	if k, ok := kinds[it.Spec.Kind].(limiterKind); ok {
		if err := limiterScope(it, field); err != nil {
			return err
		}
		switch {
		case !write:
			return apierr.Invalid("%sspec.kind: %s", field, errLimiterRead)
		case it.Hits < 0 || it.Hits > l.maxHits:
			return apierr.Invalid("%scost must be between 0 and %d", field, l.maxHits)
		}
		return k.check(it, l, field)
	}
	switch {
	case sc.Policy != "":
		return apierr.Invalid("%sscope.policy is for rate limiter kinds", field)
	case sc.Campaign != "" && sc.Business != 0:
		return apierr.Invalid("%sscope: give campaign or business, not both", field)
	case sc.Campaign != "":
		if !ids.ValidCID(sc.Campaign) {
			return apierr.Invalid("%sscope.campaign must be %s", field, ids.CIDRule)
		}
		if sc.Event == "" {
			sc.Event = l.events[0]
		}
		if !slices.Contains(l.events, sc.Event) {
			return apierr.Invalid("%sscope.event must be one of %v", field, l.events)
		}
		if !slices.Contains(l.dims, it.Subject.Dim) {
			return apierr.Invalid("%ssubject.dim must be one of %v", field, l.dims)
		}
		if !ids.ValidID(it.Subject.ID) {
			return apierr.Invalid("%ssubject.id must be %s", field, ids.IDRule)
		}
	case sc.Business != 0:
		if sc.Event != "" || it.Subject.Dim != "" {
			return apierr.Invalid("%sscope.event and subject.dim belong to campaign counters, not business keys", field)
		}
		if !ids.ValidKey(it.Subject.ID) {
			return apierr.Invalid("%ssubject.id (the key) must be %s", field, ids.KeyRule)
		}
	default:
		return apierr.Invalid("%sscope: campaign or business is required", field)
	}
	k, ok := kinds[it.Spec.Kind]
	if !ok {
		return apierr.Invalid("%sspec.kind must be one of %v", field, kindNames())
	}
	switch {
	case write && (it.Hits < 1 || it.Hits > l.maxHits):
		return apierr.Invalid("%shits must be between 1 and %d on a write", field, l.maxHits)
	case !write && it.Hits != 0:
		return apierr.Invalid("%shits must be 0 on a read", field)
	case !write && it.EventID != "":
		return apierr.Invalid("%seventId is only accepted on writes", field)
	case it.EventID != "" && !ids.ValidID(it.EventID):
		return apierr.Invalid("%seventId must be %s", field, ids.IDRule)
	}
	return k.check(it, l, field)
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
