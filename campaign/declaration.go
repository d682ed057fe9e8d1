package campaign

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/freqcap/freqcap/core"
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
	// Identities are the identity types (dimensions) the campaign caps
	// on, in order of preference: a bid request is capped under the first
	// it carries, by the caps on that type only (caps on other dimensions
	// always apply). Empty: every cap applies to what the request carries.
	Identities []string `json:"identities,omitempty"`
	// NoIdentity is what a bid request with none of Identities gets:
	// "bid" (allowed, uncapped; the default) or "nobid" (blocked, reason
	// no_identity).
	NoIdentity string `json:"noIdentity,omitempty"`
	// End is when the campaign ends: an RFC 3339 instant
	// (2027-01-31T23:00:00Z) or a date (2027-01-31: the end of that day
	// in Timezone). Lifetime caps count until then.
	End string `json:"end,omitempty"`
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

// EndUnix is End in unix seconds (0 when there is none).
func (d *Declaration) EndUnix() (int64, error) {
	if d.End == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, d.End); err == nil {
		return t.Unix(), nil
	}
	loc := time.UTC
	if d.Timezone != "" {
		var err error
		if loc, err = core.LoadZone(d.Timezone); err != nil {
			return 0, err
		}
	}
	day, err := time.ParseInLocation(time.DateOnly, d.End, loc)
	if err != nil {
		return 0, fmt.Errorf("end %q: want an RFC 3339 instant (2027-01-31T23:00:00Z) or a date (2027-01-31)", d.End)
	}
	return day.AddDate(0, 0, 1).Unix(), nil
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
	idents := strings.Join(d.Identities, ",")
	return []string{"winLimitHours", strconv.Itoa(d.WinLimitHours), "paceWindowSec", strconv.Itoa(d.PaceWindowSec), "caps", string(caps),
		"advertiser", d.Advertiser, "io", d.IO, "timezone", d.Timezone, "end", d.End,
		"identities", idents, "noIdentity", d.NoIdentity}
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
	d.Advertiser, d.IO, d.Timezone, d.End = m["advertiser"], m["io"], m["timezone"], m["end"]
	if v := m["identities"]; v != "" {
		d.Identities = strings.Split(v, ",")
	}
	d.NoIdentity = m["noIdentity"]
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
