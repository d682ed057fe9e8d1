package campaign

import (
	"slices"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// Cap is one frequency cap a campaign declares (counting.Cap).
type Cap = counting.Cap

// Window is a cap's window (counting.CapWindow).
type Window = counting.CapWindow

// The levels and window units of caps.
const (
	LevelCampaign = "campaign"

	UnitDay     = "day"
	UnitWeek    = "week"
	UnitMonth   = "month"
	UnitHours   = "hours"
	UnitMinutes = "minutes"
	UnitSeconds = "seconds"
)

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

// CheckCaps validates a campaign's caps whole, naming the field at fault
// (caps[2].window.n): each within the bounds, and, since one exact window
// is recorded per campaign and event, one exact window length per event,
// which must also be paceWindowSec's when that is set.
func CheckCaps(caps []Cap, b CapBounds, paceWindowSec int) error {
	if len(caps) > MaxCaps {
		return apierr.Invalid("caps: at most %d", MaxCaps)
	}
	exact := map[string]int{}
	for i := range caps {
		c := &caps[i]
		if err := checkCap(c, b, i); err != nil {
			return err
		}
		s := seconds(c.Window)
		if s == 0 {
			continue
		}
		if prev, ok := exact[c.Event]; ok && prev != s {
			return apierr.Invalid("caps[%d].window: an exact window of %d s for %s, where another cap has one of %d s: one exact window per event", i, s, c.Event, prev)
		}
		if paceWindowSec > 0 && s != paceWindowSec {
			return apierr.Invalid("caps[%d].window: an exact window of %d s, where paceWindowSec is %d: one exact window per event", i, s, paceWindowSec)
		}
		exact[c.Event] = s
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
	case c.Level != LevelCampaign:
		return apierr.Invalid("caps[%d].level must be %q: advertiser, io and creative levels are not counted yet", i, LevelCampaign)
	case len(b.Events) > 0 && !slices.Contains(b.Events, c.Event):
		return apierr.Invalid("caps[%d].event must be one of %v", i, b.Events)
	case len(b.Dimensions) > 0 && !slices.Contains(b.Dimensions, c.Dim):
		return apierr.Invalid("caps[%d].dim must be one of %v", i, b.Dimensions)
	case c.Limit < 1 || c.Limit > 1_000_000:
		return apierr.Invalid("caps[%d].limit must be between 1 and 1000000", i)
	case w.MinGapSec < 0 || w.MinGapSec > 0 && seconds(w) == 0:
		return apierr.Invalid("caps[%d].window.minGapSec is for exact windows (minutes, seconds), 0 or more", i)
	}
	switch w.Unit {
	case UnitDay, UnitWeek, UnitMonth:
		if w.N != 1 {
			return apierr.Invalid("caps[%d].window.n must be 1 for a %s (this one)", i, w.Unit)
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
		return apierr.Invalid("caps[%d].window.unit must be one of day, week, month, hours, minutes, seconds (lifetime is not counted yet)", i)
	}
	return nil
}

// Need is what the notices of one event must be counted in for a
// campaign's caps: the hours to keep summable (0: none), the exact
// window, in seconds (0: none), and the natural week and month.
type Need struct {
	Hours       int
	PaceSec     int
	Week, Month bool
}

// Needs are, by event, what a campaign's caps need counted: the largest
// hour window and the exact window of each event.
func Needs(caps []Cap) map[string]Need {
	out := map[string]Need{}
	for _, c := range caps {
		n := out[c.Event]
		switch c.Window.Unit {
		case UnitHours:
			n.Hours = max(n.Hours, c.Window.N)
		case UnitMinutes, UnitSeconds:
			n.PaceSec = seconds(c.Window)
		case UnitWeek:
			n.Week = true
		case UnitMonth:
			n.Month = true
		}
		out[c.Event] = n
	}
	return out
}
