package campaign

import (
	"reflect"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/counting"
)

func TestCheckCapsNamesTheField(t *testing.T) {
	b := CapBounds{Events: []string{"win", "billing", "imp"}, MaxHours: 168, MaxSliding: 3600}
	day := Window{Unit: UnitDay, N: 1}
	for name, tt := range map[string]struct {
		caps []Cap
		pace int
		adv  string
		want string // "" is valid
	}{
		"day, hours and an exact window": {caps: []Cap{{Event: "win", Window: day, Limit: 3}, {Event: "win", Window: Window{Unit: UnitHours, N: 2}, Limit: 1},
			{Event: "imp", Window: Window{Unit: UnitMinutes, N: 10, MinGapSec: 60}, Limit: 2}}},
		"defaults: campaign level, the first event": {caps: []Cap{{Window: day, Limit: 1}}},
		"an advertiser level":                       {caps: []Cap{{Level: "advertiser", Window: day, Limit: 1}}, adv: "acme"},
		"an advertiser level without one":           {caps: []Cap{{Level: "advertiser", Window: day, Limit: 1}}, want: "caps[0].level: a cap at the advertiser level needs the campaign's advertiser"},
		"an io level without one":                   {caps: []Cap{{Level: "io", Window: day, Limit: 1}}, adv: "acme", want: "caps[0].level: a cap at the io level"},
		"a creative level":                          {caps: []Cap{{Level: "creative", Window: day, Limit: 1}}},
		"an unknown level":                          {caps: []Cap{{Level: "brand", Window: day, Limit: 1}}, want: "caps[0].level must be one of"},
		"an advertiser id with a colon":             {caps: []Cap{{Window: day, Limit: 1}}, adv: "a:b", want: "advertiser must be"},
		"one exact window per level":                {caps: []Cap{{Window: Window{Unit: UnitMinutes, N: 10}, Limit: 1}, {Level: "creative", Window: Window{Unit: UnitSeconds, N: 60}, Limit: 1}}},
		"an unknown event":                          {caps: []Cap{{Window: day, Limit: 1}, {Event: "click", Window: day, Limit: 1}}, want: "caps[1].event"},
		"a limit of 0":                              {caps: []Cap{{Window: day, Limit: 0}}, want: "caps[0].limit"},
		"two days":                                  {caps: []Cap{{Window: Window{Unit: UnitDay, N: 2}, Limit: 1}}},
		"91 days":                                   {caps: []Cap{{Window: Window{Unit: UnitDay, N: 91}, Limit: 1}}, want: "caps[0].window.n must be between 1 and 90 for a day"},
		"more hours than kept":                      {caps: []Cap{{Window: Window{Unit: UnitHours, N: 169}, Limit: 1}}, want: "caps[0].window.n must be between 1 and 168"},
		"an exact window too long":                  {caps: []Cap{{Window: Window{Unit: UnitMinutes, N: 61}, Limit: 1}}, want: "caps[0].window.n"},
		"a gap on hours":                            {caps: []Cap{{Window: Window{Unit: UnitHours, N: 1, MinGapSec: 5}, Limit: 1}}, want: "caps[0].window.minGapSec"},
		"a gap longer than its window":              {caps: []Cap{{Window: Window{Unit: UnitSeconds, N: 60, MinGapSec: 61}, Limit: 1}}, want: "caps[0].window.minGapSec"},
		"this week and this month":                  {caps: []Cap{{Window: Window{Unit: UnitWeek, N: 1}, Limit: 5}, {Window: Window{Unit: UnitMonth, N: 1}, Limit: 20}}},
		"two weeks":                                 {caps: []Cap{{Window: Window{Unit: UnitWeek, N: 2}, Limit: 1}}},
		"25 months":                                 {caps: []Cap{{Window: Window{Unit: UnitMonth, N: 25}, Limit: 1}}, want: "caps[0].window.n must be between 1 and 24 for a month"},
		"a lifetime without an end":                 {caps: []Cap{{Window: Window{Unit: "lifetime", N: 1}, Limit: 1}}, want: "caps[0].window: a lifetime cap needs the campaign's end"},
		"a fortnight":                               {caps: []Cap{{Window: Window{Unit: "fortnight", N: 1}, Limit: 1}}, want: "caps[0].window.unit"},
		"two exact windows of one event": {caps: []Cap{{Window: Window{Unit: UnitMinutes, N: 10}, Limit: 1}, {Window: Window{Unit: UnitSeconds, N: 60}, Limit: 1}},
			want: "caps[1].window: an exact window of 60 s"},
		"an exact window other than paceWindowSec": {caps: []Cap{{Window: Window{Unit: UnitMinutes, N: 10}, Limit: 1}}, pace: 300, want: "paceWindowSec is 300"},
		"the exact window of paceWindowSec":        {caps: []Cap{{Window: Window{Unit: UnitMinutes, N: 5}, Limit: 1}}, pace: 300},
		"12 caps":                                  {caps: manyCaps(12)},
		"32 caps":                                  {caps: manyCaps(MaxCaps)},
		"33 caps":                                  {caps: manyCaps(MaxCaps + 1), want: "caps: at most 32"},
	} {
		d := Declaration{Caps: tt.caps, PaceWindowSec: tt.pace, Advertiser: tt.adv}
		err := d.Check(b)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error naming %q", name, err, tt.want)
		}
	}
}

func TestNeedsAreTheLargestWindowsByEvent(t *testing.T) {
	caps := []Cap{
		{Event: "win", Window: Window{Unit: UnitHours, N: 2}, Limit: 1},
		{Event: "win", Window: Window{Unit: UnitHours, N: 24}, Limit: 5},
		{Event: "win", Window: Window{Unit: UnitDay, N: 1}, Limit: 9},
		{Event: "imp", Window: Window{Unit: UnitMinutes, N: 10}, Limit: 1},
		{Event: "imp", Window: Window{Unit: UnitMonth, N: 1}, Limit: 30},
		{Event: "billing", Window: Window{Unit: UnitWeek, N: 1}, Limit: 7},
		{Event: "billing", Window: Window{Unit: UnitDay, N: 3}, Limit: 7},
		{Event: "billing", Window: Window{Unit: UnitDay, N: 7}, Limit: 9},
		{Event: "billing", Window: Window{Unit: UnitMonth, N: 2}, Limit: 9},
	}
	for i := range caps {
		caps[i].Level, caps[i].Dim = LevelCampaign, "device"
	}
	caps = append(caps, Cap{Level: LevelAdvertiser, Event: "win", Dim: "bundle", Window: Window{Unit: UnitHours, N: 48}, Limit: 9})
	got := Needs(caps, LevelCampaign)
	dev := []string{"device"}
	if !reflect.DeepEqual(got, map[string]Need{"win": {Hours: 24, Dims: dev}, "imp": {PaceSec: 600, Month: true, Dims: dev}, "billing": {Week: true, Periods: map[string]int{"day": 7, "month": 2}, Dims: dev}}) {
		t.Errorf("Needs at the campaign = %v", got)
	}
	if ps := got["billing"].PeriodList(); !reflect.DeepEqual(ps, []counting.Period{{Unit: "day", N: 7}, {Unit: "month", N: 2}}) {
		t.Errorf("PeriodList = %v", ps)
	}
	adv := Needs(caps, LevelAdvertiser)
	if !reflect.DeepEqual(adv, map[string]Need{"win": {Hours: 48, Dims: []string{"bundle"}}}) {
		t.Errorf("Needs at the advertiser = %v", adv)
	}
	if u := got["win"].Union(adv["win"]); !reflect.DeepEqual(u, Need{Hours: 48, Dims: []string{"bundle", "device"}}) {
		t.Errorf("Union = %v", u)
	}
}

// manyCaps are n valid caps: days and hour windows of every event.
func manyCaps(n int) []Cap {
	out := make([]Cap, n)
	for i := range out {
		out[i] = Cap{Event: []string{"win", "billing", "imp"}[i%3], Window: Window{Unit: UnitHours, N: 1 + i}, Limit: int64(1 + i)}
		if i%4 == 0 {
			out[i].Window = Window{Unit: UnitDay, N: 1}
		}
	}
	return out
}
