package campaign

import (
	"maps"
	"math"
	"slices"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// Cap is one frequency cap a campaign declares (counting.Cap).
type Cap = counting.Cap

// Window is a cap's window (counting.CapWindow).
type Window = counting.CapWindow

// The levels of caps (counting.Levels).
const (
	LevelAdvertiser = counting.LevelAdvertiser
	LevelIO         = counting.LevelIO
	LevelCampaign   = counting.LevelCampaign
	LevelCreative   = counting.LevelCreative
)

// The window units of caps.
const (
	UnitDay   = "day"
	UnitWeek  = "week"
	UnitMonth = "month"
	UnitHours = "hours"
	// UnitLifetime counts until the campaign's end (Declaration.End).
	UnitLifetime = "lifetime"
	UnitMinutes  = "minutes"
	UnitSeconds  = "seconds"
)

// ThenBlock makes a cap a suppression (Cap.Then).
const ThenBlock = "block"

// MaxCaps bounds the caps of one campaign.
const MaxCaps = 32

// CapBounds are what the counter can keep: its dimensions and events, the hours an hour
// hash keeps (COUNTER_MAX_WINDOW_HOURS) and the longest exact window
// (COUNTER_MAX_PACE_WINDOW_SEC). A cap beyond them is refused when it is
// declared, never shortened later.
type CapBounds struct {
	Dimensions []string
	Events     []string
	MaxHours   int
	MaxSliding int
}

// span is about how long a window lasts, in seconds: how long a cap
// reached in it may block (a natural period's longest).
func span(w Window) int64 {
	switch w.Unit {
	case UnitDay:
		return int64(w.N) * 86400
	case UnitWeek:
		return int64(w.N) * 7 * 86400
	case UnitMonth:
		return int64(w.N) * 31 * 86400
	case UnitHours:
		return int64(w.N) * 3600
	case UnitLifetime:
		return math.MaxInt64
	}
	return int64(seconds(w))
}

// seconds is an exact window's length in seconds (0 for other units).
func seconds(w Window) int {
	switch w.Unit {
	case UnitMinutes:
		return w.N * 60
	case UnitSeconds:
		return w.N
	}
	return 0
}

// Check validates a declaration whole, naming the field at fault
// (caps[2].window.n): its parents' ids, each cap within the bounds and at a
// level the campaign has (an advertiser cap needs the advertiser), and,
// since one exact window is recorded per level and event, one exact
// window length per level and event, which at the campaign level must
// also be paceWindowSec's when that is set.
func (d *Declaration) Check(b CapBounds) error {
	for _, p := range []struct{ field, id string }{{"advertiser", d.Advertiser}, {"io", d.IO}} {
		if p.id != "" && !ids.ValidCID(p.id) {
			return apierr.Invalid("%s must be %s", p.field, ids.CIDRule)
		}
	}
	if d.Timezone != "" {
		if _, err := core.LoadZone(d.Timezone); err != nil {
			return apierr.Invalid("timezone: %v", err)
		}
	}
	if _, err := d.EndUnix(); err != nil {
		return apierr.Invalid("%v", err)
	}
	if err := d.checkIdentities(b); err != nil {
		return err
	}
	if len(d.Caps) > MaxCaps {
		return apierr.Invalid("caps: at most %d", MaxCaps)
	}
	exact := map[[2]string]int{}
	for i := range d.Caps {
		c := &d.Caps[i]
		if err := checkCap(c, b, i); err != nil {
			return err
		}
		if c.Level == LevelAdvertiser && d.Advertiser == "" || c.Level == LevelIO && d.IO == "" {
			return apierr.Invalid("caps[%d].level: a cap at the %s level needs the campaign's %s", i, c.Level, c.Level)
		}
		if err := d.checkLifetime(c, i); err != nil {
			return err
		}
		s := seconds(c.Window)
		if s == 0 {
			continue
		}
		key := [2]string{c.Level, c.Event}
		if prev, ok := exact[key]; ok && prev != s {
			return apierr.Invalid("caps[%d].window: an exact window of %d s for %s at the %s level, where another cap has one of %d s: one exact window per level and event", i, s, c.Event, c.Level, prev)
		}
		if c.Level == LevelCampaign && d.PaceWindowSec > 0 && s != d.PaceWindowSec {
			return apierr.Invalid("caps[%d].window: an exact window of %d s, where paceWindowSec is %d: one exact window per event", i, s, d.PaceWindowSec)
		}
		exact[key] = s
	}
	return nil
}

// NoBid and Bid are what a request without any of a campaign's
// identities gets (Declaration.NoIdentity).
const (
	Bid   = "bid"
	NoBid = "nobid"
)

// checkIdentities validates the identity types: known dimensions, each
// once, and what a request without any of them gets.
func (d *Declaration) checkIdentities(b CapBounds) error {
	for i, t := range d.Identities {
		if len(b.Dimensions) > 0 && !slices.Contains(b.Dimensions, t) || slices.Index(d.Identities, t) != i {
			return apierr.Invalid("identities[%d] must be one of %v, each once", i, b.Dimensions)
		}
	}
	if d.NoIdentity != "" && d.NoIdentity != Bid && d.NoIdentity != NoBid {
		return apierr.Invalid("noIdentity must be %q (allowed, uncapped) or %q", Bid, NoBid)
	}
	return nil
}

// checkLifetime validates a lifetime cap: it needs the campaign's end, and
// counts at the campaign or creative level (a parent's campaigns end on
// different dates).
func (d *Declaration) checkLifetime(c *Cap, i int) error {
	if c.Window.Unit != UnitLifetime {
		return nil
	}
	if c.Level == LevelAdvertiser || c.Level == LevelIO {
		return apierr.Invalid("caps[%d].window: a lifetime is the campaign's, at the campaign or creative level", i)
	}
	if d.End == "" {
		return apierr.Invalid("caps[%d].window: a lifetime cap needs the campaign's end", i)
	}
	return nil
}

// checkCap validates one cap; the event and the dimension default to the
// counter's first.
func checkCap(c *Cap, b CapBounds, i int) error {
	if c.Level == "" {
		c.Level = LevelCampaign
	}
	if c.Event == "" && len(b.Events) > 0 {
		c.Event = b.Events[0]
	}
	if c.Dim == "" && len(b.Dimensions) > 0 {
		c.Dim = b.Dimensions[0]
	}
	w := c.Window
	switch {
	case !slices.Contains(counting.Levels, c.Level):
		return apierr.Invalid("caps[%d].level must be one of %v", i, counting.Levels)
	case len(b.Events) > 0 && !slices.Contains(b.Events, c.Event):
		return apierr.Invalid("caps[%d].event must be one of %v", i, b.Events)
	case len(b.Dimensions) > 0 && !slices.Contains(b.Dimensions, c.Dim):
		return apierr.Invalid("caps[%d].dim must be one of %v", i, b.Dimensions)
	case c.Limit < 1 || c.Limit > 1_000_000:
		return apierr.Invalid("caps[%d].limit must be between 1 and 1000000", i)
	case c.Then != "" && c.Then != ThenBlock:
		return apierr.Invalid("caps[%d].then must be %q (a suppression) or absent", i, ThenBlock)
	case w.MinGapSec < 0 || w.MinGapSec > 0 && seconds(w) == 0:
		return apierr.Invalid("caps[%d].window.minGapSec is for exact windows (minutes, seconds), 0 or more", i)
	}
	switch w.Unit {
	case UnitLifetime:
		if w.N > 1 {
			return apierr.Invalid("caps[%d].window.n must be 1 (or absent) for a lifetime", i)
		}
	case UnitDay, UnitWeek, UnitMonth:
		if most := core.MaxPeriods[PeriodKind(w.Unit)]; w.N < 1 || int64(w.N) > most {
			return apierr.Invalid("caps[%d].window.n must be between 1 and %d for a %s (this one and the n-1 before)", i, most, w.Unit)
		}
	case UnitHours:
		if w.N < 1 || w.N > b.MaxHours {
			return apierr.Invalid("caps[%d].window.n must be between 1 and %d hours (the counter's COUNTER_MAX_WINDOW_HOURS)", i, b.MaxHours)
		}
	case UnitMinutes, UnitSeconds:
		if s := seconds(w); w.N < 1 || s > b.MaxSliding {
			return apierr.Invalid("caps[%d].window.n must make 1 to %d seconds (the counter's COUNTER_MAX_PACE_WINDOW_SEC)", i, b.MaxSliding)
		}
		if w.MinGapSec > seconds(w) {
			return apierr.Invalid("caps[%d].window.minGapSec must be at most the window (%d s)", i, seconds(w))
		}
	default:
		return apierr.Invalid("caps[%d].window.unit must be one of day, week, month, lifetime, hours, minutes, seconds", i)
	}
	return nil
}

// Need is what the notices of one event must be counted in at one level
// for the caps there: the hours to keep summable (0: none), the exact
// window, in seconds (0: none), the natural week and month, and the
// dimensions the caps count (a campaign counts every dimension; the other
// levels only these).
type Need struct {
	Hours   int  `json:"hours,omitempty"`
	PaceSec int  `json:"paceSec,omitempty"`
	Week    bool `json:"week,omitempty"`
	Month   bool `json:"month,omitempty"`
	// Lifetime: count until the campaign's end.
	Lifetime bool     `json:"lifetime,omitempty"`
	Dims     []string `json:"dims,omitempty"`
	// Periods are the most natural periods of each unit (day, week,
	// month) a cap reads, when more than this one.
	Periods map[string]int `json:"periods,omitempty"`
}

// PeriodList is n's periods as a write names them, in unit order.
func (n Need) PeriodList() []counting.Period {
	var out []counting.Period
	for _, u := range []string{UnitDay, UnitWeek, UnitMonth} {
		if k := n.Periods[u]; k > 1 {
			out = append(out, counting.Period{Unit: u, N: k})
		}
	}
	return out
}

// Needs are, by event, what the caps at level need counted: the largest
// hour window, the exact window, the week and month of each event, and
// its dimensions.
func Needs(caps []Cap, level string) map[string]Need {
	out := map[string]Need{}
	for _, c := range caps {
		if c.Level != level {
			continue
		}
		out[c.Event] = out[c.Event].with(c)
	}
	return out
}

// with is n and what cap c needs.
func (n Need) with(c Cap) Need {
	switch u := c.Window.Unit; {
	case u == UnitHours:
		n.Hours = max(n.Hours, c.Window.N)
	case u == UnitMinutes, u == UnitSeconds:
		n.PaceSec = seconds(c.Window)
	case PeriodKind(u) != "" && c.Window.N > 1:
		n = n.Union(Need{Periods: map[string]int{u: c.Window.N}})
	case u == UnitWeek:
		n.Week = true
	case u == UnitMonth:
		n.Month = true
	case u == UnitLifetime:
		n.Lifetime = true
	}
	if !slices.Contains(n.Dims, c.Dim) {
		n.Dims = append(slices.Clone(n.Dims), c.Dim)
		slices.Sort(n.Dims)
	}
	return n
}

// Union is what both n and o need; exact windows of different lengths
// cannot be (Check and the parents' index refuse them): n's is kept.
func (n Need) Union(o Need) Need {
	n.Hours = max(n.Hours, o.Hours)
	if n.PaceSec == 0 {
		n.PaceSec = o.PaceSec
	}
	n.Week, n.Month, n.Lifetime = n.Week || o.Week, n.Month || o.Month, n.Lifetime || o.Lifetime
	if len(o.Periods) > 0 {
		ps := maps.Clone(n.Periods)
		if ps == nil {
			ps = map[string]int{}
		}
		for u, k := range o.Periods {
			ps[u] = max(ps[u], k)
		}
		n.Periods = ps
	}
	for _, d := range o.Dims {
		if !slices.Contains(n.Dims, d) {
			n.Dims = append(slices.Clone(n.Dims), d)
		}
	}
	slices.Sort(n.Dims)
	return n
}
