package campaign

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Declaration is what a campaign declares (callback's admin API and
// campaigns file store it; the counter and the client's direct mode read
// it): its windows and its caps.
type Declaration struct {
	// Advertiser and IO are the campaign's parents: caps at their level
	// count the notices of every campaign that names them.
	Advertiser string `json:"advertiser,omitempty"`
	IO         string `json:"io,omitempty"`
	// Timezone is the IANA zone (America/New_York) of the natural day,
	// week and month of its caps, DST included; the counter's
	// COUNTER_TIMEZONE when empty. The campaigns of one advertiser or io
	// with caps there share it.
	Timezone string `json:"timezone,omitempty"`
	// WinLimitHours > 0 makes every notice also count in the hour buckets
	// of the last WinLimitHours hours.
	WinLimitHours int `json:"winLimitHours"`
	// PaceWindowSec > 0 makes every notice also recorded, by event id, in
	// the exact sliding window of that many seconds.
	PaceWindowSec int `json:"paceWindowSec,omitempty"`
	// Caps are the campaign's declared caps: the notices of each event are
	// counted in what its caps need (the largest hour window, the exact
	// window), on top of WinLimitHours and PaceWindowSec.
	Caps []Cap `json:"caps,omitempty"`
}

// LevelID is the id whose counters a cap at level reads for a candidate
// of campaign cid serving creative crid: "" when the candidate has none
// (a creative cap without a crid), and the cap does not apply.
func (d *Declaration) LevelID(level, cid, crid string) string {
	switch level {
	case LevelAdvertiser:
		return d.Advertiser
	case LevelIO:
		return d.IO
	case LevelCreative:
		return crid
	}
	return cid
}

// Key is the Redis hash of campaign cid.
func Key(cid string) string { return "campaign:{" + cid + "}" }

// Need is what a notice of event must be counted in: WinLimitHours and
// PaceWindowSec for every event, and what the caps of that event need.
func (d Declaration) Need(event string) Need {
	n := Needs(d.Caps, LevelCampaign)[event]
	n.Hours = max(n.Hours, d.WinLimitHours)
	if n.PaceSec == 0 {
		n.PaceSec = d.PaceWindowSec
	}
	return n
}

// Fields are the declaration's hash fields and values.
func (d Declaration) Fields() []string {
	caps, _ := json.Marshal(d.Caps)
	if d.Caps == nil {
		caps = []byte("[]")
	}
	return []string{"winLimitHours", strconv.Itoa(d.WinLimitHours), "paceWindowSec", strconv.Itoa(d.PaceWindowSec), "caps", string(caps),
		"advertiser", d.Advertiser, "io", d.IO, "timezone", d.Timezone}
}

// Parse reads campaign cid's declaration from its hash fields (hand
// edits with redis-cli included): an unreadable field is an error naming
// it.
func Parse(cid string, m map[string]string) (Declaration, error) {
	var d Declaration
	if v, ok := m["caps"]; ok {
		if err := json.Unmarshal([]byte(v), &d.Caps); err != nil {
			return Declaration{}, fmt.Errorf("campaign %s: caps %q are not a JSON list of caps: %v", cid, v, err)
		}
	}
	d.Advertiser, d.IO, d.Timezone = m["advertiser"], m["io"], m["timezone"]
	for field, dst := range map[string]*int{"winLimitHours": &d.WinLimitHours, "paceWindowSec": &d.PaceWindowSec} {
		v, ok := m[field]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return Declaration{}, fmt.Errorf("campaign %s: %s %q is not a whole number", cid, field, v)
		}
		*dst = n
	}
	return d, nil
}
