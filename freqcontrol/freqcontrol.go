// Package freqcontrol is the generic frequency-control API over the
// counting core: a business key is one window counter (kind seconds or day)
// in gfreq:{b:<business id>:<key>}. AddFreq adds to it (the first add opens
// a window of the given span), GetFreq reads whatever window is live.
//
// It speaks plain Go; the counter maps its RPCs (gRPC, Connect) onto it.
package freqcontrol

import (
	"context"
	"log/slog"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/deadline"
	"github.com/freqcap/freqcap/shared/ids"
)

// Unit is the unit of an add's span.
type Unit int

const (
	Unspecified Unit = iota
	Seconds          // a window of span seconds from the first add
	Days             // span natural days, the first add's day included
)

// Key names one business key.
type Key struct {
	Business uint32
	Key      string
}

// Add is one AddFreq: add one to the key's live window, opening one of
// Span Units if none is live. EventID, when set, makes a resend count once.
type Add struct {
	Key
	Unit    Unit
	Span    int64
	EventID string
}

// Freq answers one add or read. Code is 0, apierr.KeyNotFound (no live
// window), apierr.Timeout or apierr.Unavailable; internal detail is logged,
// never in Msg. TTL is the window's remaining seconds, rounded up.
type Freq struct {
	Code  int32
	Msg   string
	Freq  uint32
	TTL   uint32
	Stale bool  // a last-known value (reads only)
	AgeMs int64 // how old a stale value is
}

// Service adds and reads business keys on a core store.
type Service struct {
	log          *slog.Logger
	store        *core.Store
	writeTimeout time.Duration
	sometimes    rate.Sometimes
}

// New returns a Service on store; writeTimeout bounds a write
// (COUNTER_WRITE_TIMEOUT), reads have the store's read deadline.
func New(log *slog.Logger, store *core.Store, writeTimeout time.Duration) *Service {
	return &Service{log: log, store: store, writeTimeout: writeTimeout, sometimes: rate.Sometimes{Interval: time.Second}}
}

// AddItem validates one add and turns it into a core item; field prefixes
// field names in errors (e.g. "requests[2].").
func (s *Service) AddItem(a Add, field string) (counting.Item, error) {
	it := counting.Item{
		Scope:   counting.Scope{Business: a.Business},
		Subject: counting.Subject{ID: a.Key.Key},
		Spec:    counting.Spec{Span: a.Span},
		Hits:    1,
		EventID: a.EventID,
	}
	if err := checkKey(a.Key, field); err != nil {
		return it, err
	}
	lim := s.store.Limits()
	var most int
	var unit string
	switch a.Unit {
	case Seconds:
		it.Spec.Kind, most, unit = counting.Seconds, lim.MaxSeconds, "TIME_UNIT_SEC"
	case Days:
		it.Spec.Kind, most, unit = counting.Day, lim.MaxDays, "TIME_UNIT_DAY"
	default:
		return it, apierr.Invalid("%stime_unit must be TIME_UNIT_SEC or TIME_UNIT_DAY", field)
	}
	if it.Spec.Span < 1 || it.Spec.Span > int64(most) {
		return it, apierr.Invalid("%stime_span must be between 1 and %d for %s", field, most, unit)
	}
	if it.EventID != "" && !ids.ValidID(it.EventID) {
		return it, apierr.Invalid("%sevent_id must be %s", field, ids.IDRule)
	}
	return it, lim.Check(&it, true, field)
}

// GetItem validates one read of a key's live window.
func (s *Service) GetItem(k Key, field string) (counting.Item, error) {
	it := counting.Item{
		Scope:   counting.Scope{Business: k.Business},
		Subject: counting.Subject{ID: k.Key},
		Spec:    counting.Spec{Kind: counting.Seconds},
	}
	if err := checkKey(k, field); err != nil {
		return it, err
	}
	return it, s.store.Limits().Check(&it, false, field)
}

func checkKey(k Key, field string) error {
	if k.Business == 0 {
		return apierr.Invalid("%sbusiness_id must be greater than 0", field)
	}
	if !ids.ValidKey(k.Key) {
		return apierr.Invalid("%skey must be %s", field, ids.KeyRule)
	}
	return nil
}

// Write adds validated items (AddItem) within the write deadline; while
// Redis is stalled it answers Unavailable at once.
func (s *Service) Write(ctx context.Context, its []counting.Item) []Freq {
	ctx, cancel := deadline.Within(ctx, s.writeTimeout)
	defer cancel()
	return s.answers(ctx, s.store.WriteOrSkip(ctx, its))
}

// Read reads validated items (GetItem) within the read deadline, answering
// last-known values while Redis cannot.
func (s *Service) Read(ctx context.Context, its []counting.Item) []Freq {
	return s.answers(ctx, s.store.Read(ctx, its))
}

func (s *Service) answers(ctx context.Context, res []counting.Result) []Freq {
	out := make([]Freq, len(res))
	for i := range res {
		out[i] = s.answer(ctx, &res[i])
	}
	return out
}

// answer maps one core result. Internal detail is logged (at most once a
// second), never sent.
func (s *Service) answer(ctx context.Context, r *counting.Result) Freq {
	var f Freq
	switch r.Code {
	case apierr.OK:
	case apierr.KeyNotFound:
		f.Code, f.Msg = apierr.KeyNotFound, "key not found: no live window"
	case apierr.Timeout:
		f.Code, f.Msg = apierr.Timeout, "redis did not answer in time"
	default:
		f.Code, f.Msg = apierr.Unavailable, "redis unavailable"
	}
	if f.Code == apierr.Timeout || f.Code == apierr.Unavailable {
		s.sometimes.Do(func() { s.log.WarnContext(ctx, "frequency control: redis failed", "code", r.Code, "err", r.Msg) })
		return f
	}
	f.Freq = uint32(min(r.Count, math.MaxUint32))
	f.TTL = uint32(min((r.TTLMs+999)/1000, math.MaxUint32))
	f.Stale, f.AgeMs = r.Stale, r.AgeMs
	return f
}

// CheckSize refuses a batch of n outside 1..most.
func CheckSize(n, most int) error {
	if n < 1 || n > most {
		return apierr.Invalid("requests must hold 1 to %d requests, got %d", most, n)
	}
	return nil
}
