package campaign

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/freqcap/freqcap/core"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
)

// MaxWindows is how many hour windows one read may ask for.
const MaxWindows = 10

// Parser turns requests into queries, validated against the configured
// dimensions, events and largest windows.
type Parser struct {
	dims      []string
	events    []string
	maxWindow int
	maxPace   int
}

// NewParser validates against l (core.Limits: the dimensions, events,
// hours kept and longest exact window).
func NewParser(l *core.Limits) *Parser {
	return &Parser{dims: l.Dimensions, events: l.Events, maxWindow: l.MaxHours, maxPace: l.MaxSliding}
}

// MaxPace is the longest exact window, in seconds.
func (p *Parser) MaxPace() int { return p.maxPace }

// FromURL reads one query from URL parameters. Every parameter must be known
// and given once: typos in an internal API must not pass silently. extra
// names the endpoint's own parameters and receives their values.
func (p *Parser) FromURL(vals url.Values, extra map[string]*string) (Query, error) {
	q := Query{Event: p.events[0]}
	for name, vs := range vals {
		if len(vs) != 1 {
			return q, apierr.Invalid("%s must be given once", name)
		}
		if err := p.set(&q, name, vs[0], extra); err != nil {
			return q, err
		}
	}
	p.sortDims(q.Dims)
	return q, p.validate(&q, "")
}

// FromQuery is FromURL of a raw query string (a request's URL.RawQuery),
// read in one pass without building url.Values: the first error in the
// string's order is the one returned.
func (p *Parser) FromQuery(raw string, extra map[string]*string) (Query, error) {
	q := Query{Event: p.events[0]}
	given := make([]string, 0, 16) // the names so far: few, or an error comes first
	err := httpjson.EachParam(raw, func(name, v string) error {
		if slices.Contains(given, name) {
			return apierr.Invalid("%s must be given once", name)
		}
		given = append(given, name)
		return p.set(&q, name, v, extra)
	})
	if err != nil {
		return q, err
	}
	p.sortDims(q.Dims)
	return q, p.validate(&q, "")
}

// set reads one URL parameter into q.
func (p *Parser) set(q *Query, name, v string, extra map[string]*string) error {
	switch name {
	case "cid":
		q.CID = v
	case "event":
		q.Event = v
	case "eid":
		q.EID = v
	case "windowHours":
		ws, err := p.windows(v)
		if err != nil {
			return err
		}
		q.Windows = ws
	case "paceWindowSec":
		n, err := IntParam(name, v, 0, p.maxPace)
		if err != nil {
			return err
		}
		q.PaceWindowSec = n
	case "week", "month":
		on, err := strconv.ParseBool(v)
		if err != nil {
			return apierr.Invalid("%s must be true or false, got %q", name, v)
		}
		if name == "week" {
			q.Week = on
		} else {
			q.Month = on
		}
	default:
		if dst, ok := extra[name]; ok {
			*dst = v
			return nil
		}
		if !slices.Contains(p.dims, name) {
			return p.unknownParam(name, extra)
		}
		if q.Dims == nil {
			q.Dims = make([]Dim, 0, 4)
		}
		q.Dims = append(q.Dims, Dim{Name: name, ID: v})
	}
	return nil
}

// windows parses windowHours: "3", or several windows "2,24"; "0" is none.
func (p *Parser) windows(v string) ([]int, error) {
	if v == "0" {
		return nil, nil
	}
	if !strings.Contains(v, ",") {
		n, err := p.window(v)
		if err != nil {
			return nil, err
		}
		return []int{n}, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxWindows {
		return nil, apierr.Invalid("windowHours takes at most %d windows", MaxWindows)
	}
	ws := make([]int, 0, len(parts))
	for _, part := range parts {
		n, err := p.window(part)
		if err != nil {
			return nil, err
		}
		ws = append(ws, n)
	}
	slices.Sort(ws)
	return slices.Compact(ws), nil
}

// window parses one window of windowHours.
func (p *Parser) window(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > p.maxWindow {
		return 0, p.windowErr("", 0)
	}
	return n, nil
}

// IntParam parses a whole number parameter within [lo, hi].
func IntParam(name, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, apierr.Invalid("%s must be a whole number between %d and %d", name, lo, hi)
	}
	return n, nil
}

// ItemPlace is item i's place in a batch, the prefix of the fields its
// errors name: items[3]. (as in items[3].windowHours).
func ItemPlace(i int) string { return "items[" + strconv.Itoa(i) + "]." }

// FromItem turns item i of a batch into a query; field names in errors are
// prefixed with the item's place (ItemPlace), made only for an item that is
// refused.
func (p *Parser) FromItem(it counting.BatchItem, i int) (Query, error) {
	q, err := p.fromItem(it, "")
	if err != nil {
		_, err = p.fromItem(it, ItemPlace(i))
	}
	return q, err
}

// fromItem is FromItem with the item's place, prefix: "" names no place
// (the usual item, refused by none of the checks, formats nothing).
func (p *Parser) fromItem(it counting.BatchItem, prefix string) (Query, error) {
	q := Query{CID: it.CID, Event: it.Event, Level: it.Level, PaceWindowSec: it.PaceWindowSec, Week: it.Week, Month: it.Month, Zone: it.Zone, LifetimeEnd: it.LifetimeEnd, Periods: it.Periods, EID: it.EID,
		Release: it.Release, Lost: it.Lost, ReserveEvent: p.events[0]}
	if q.Event == "" {
		q.Event = p.events[0]
	}
	if err := core.CheckLevel(&q.Level, prefix+"level"); err != nil {
		return q, err
	}
	if err := p.windowsOf(&q, it.WindowHours, prefix); err != nil {
		return q, err
	}
	for name, id := range it.Dims {
		if !slices.Contains(p.dims, name) {
			return q, apierr.Invalid("%sdims: unknown dimension %q (dimensions: %v)", prefix, name, p.dims)
		}
		q.Dims = append(q.Dims, Dim{Name: name, ID: id})
	}
	p.sortDims(q.Dims)
	if err := p.validate(&q, prefix); err != nil {
		return q, err
	}
	if len(it.Levels) > 2*len(counting.Levels) {
		return q, apierr.Invalid("%slevels: at most %d", prefix, 2*len(counting.Levels))
	}
	for i, l := range it.Levels {
		lp := ""
		if prefix != "" {
			lp = fmt.Sprintf("%slevels[%d].", prefix, i)
		}
		a, err := p.level(&q, l, lp)
		if err != nil {
			return q, err
		}
		q.Also = append(q.Also, a)
	}
	return q, nil
}

// ReadItem turns item i of a batch read into a query: no event id, no
// other levels (those are for writes).
func (p *Parser) ReadItem(it counting.BatchItem, i int) (Query, error) {
	q, err := p.FromItem(it, i)
	switch {
	case err != nil:
		return q, err
	case it.EID != "":
		return q, apierr.Invalid("items[%d].eid is only accepted on writes (/v1/incr/batch)", i)
	case len(it.Levels) > 0:
		return q, apierr.Invalid("items[%d].levels are only accepted on writes (/v1/incr/batch)", i)
	}
	return q, nil
}

// CheckRead makes q, a read built from its parts rather than decoded from
// an item (the client's Decide in direct mode: CID, Event, Dims and
// PaceWindowSec set), the query ReadItem makes of the item {cid, event,
// dims, windowHours: hours, paceWindowSec}. It answers false where
// ReadItem refuses that item; ReadItem then says why. The windows are
// appended to q.Windows, which may hold room for them.
func (p *Parser) CheckRead(q *Query, hours []int) bool {
	q.ReserveEvent = p.events[0]
	if q.Event == "" {
		q.Event = p.events[0]
	}
	if q.Level != "" || q.EID != "" || len(q.Also) > 0 || p.windowsOf(q, hours, "") != nil {
		return false
	}
	for i, d := range q.Dims {
		if !slices.Contains(p.dims, d.Name) || slices.ContainsFunc(q.Dims[:i], func(o Dim) bool { return o.Name == d.Name }) {
			return false
		}
	}
	p.sortDims(q.Dims)
	return p.validate(q, "") == nil
}

// level turns one more level of a write into its query: its id, the
// dimensions of q it names, its windows.
func (p *Parser) level(q *Query, l counting.LevelCount, prefix string) (Query, error) {
	a := Query{CID: l.ID, Event: q.Event, Level: l.Level, PaceWindowSec: l.PaceWindowSec, Week: l.Week, Month: l.Month, Zone: l.Zone, LifetimeEnd: l.LifetimeEnd, Periods: l.Periods,
		Lost: l.Lost}
	if err := core.CheckLevel(&a.Level, prefix+"level"); err != nil {
		return a, err
	}
	if a.Level == "" || a.Level == q.Level {
		return a, apierr.Invalid("%slevel must be another level than the item's own", prefix)
	}
	if !ids.ValidCID(a.CID) {
		return a, apierr.Invalid("%sid must be %s", prefix, ids.CIDRule)
	}
	if err := p.windowsOf(&a, l.WindowHours, prefix); err != nil {
		return a, err
	}
	if len(l.Dims) == 0 {
		return a, apierr.Invalid("%sdims: name at least one of the item's dimensions", prefix)
	}
	for _, name := range l.Dims {
		k := slices.IndexFunc(q.Dims, func(d Dim) bool { return d.Name == name })
		if k < 0 || slices.ContainsFunc(a.Dims, func(d Dim) bool { return d.Name == name }) {
			return a, apierr.Invalid("%sdims: %q is not one of the item's dimensions, or is named twice", prefix, name)
		}
		a.Dims = append(a.Dims, q.Dims[k])
	}
	p.sortDims(a.Dims)
	return a, nil
}

// windowsOf sets q's hour windows and checks its exact window and zone.
func (p *Parser) windowsOf(q *Query, hours []int, prefix string) error {
	if q.Zone != "" {
		if _, err := core.LoadZone(q.Zone); err != nil {
			return apierr.Invalid("%szone: %v", prefix, err)
		}
	}
	if len(hours) > MaxWindows {
		return apierr.Invalid("%swindowHours takes at most %d windows", prefix, MaxWindows)
	}
	for _, n := range hours {
		if n < 1 || n > p.maxWindow {
			return p.windowErr(prefix, 1)
		}
		q.Windows = append(q.Windows, n)
	}
	slices.Sort(q.Windows)
	q.Windows = slices.Compact(q.Windows)
	if q.PaceWindowSec < 0 || q.PaceWindowSec > p.maxPace {
		return apierr.Invalid("%spaceWindowSec must be a whole number between 0 and %d", prefix, p.maxPace)
	}
	if q.LifetimeEnd < 0 {
		return apierr.Invalid("%slifetimeEnd must be the campaign's end in unix seconds, or 0", prefix)
	}
	return checkPeriods(q.Periods, prefix)
}

// CheckWrite refuses what only reads may ask of q, item i of a batch, and
// its levels: more than one hour window, or two periods of one unit (a
// write keeps the one it names).
func (q *Query) CheckWrite(i int) error {
	if err := q.checkWrite(i); err != nil {
		return err
	}
	for k := range q.Also {
		if err := q.Also[k].checkWrite(i); err != nil {
			return err
		}
	}
	return nil
}

func (q *Query) checkWrite(i int) error {
	if len(q.Windows) > 1 {
		return apierr.Invalid("%swindowHours takes one window on writes (the largest of the caps)", ItemPlace(i))
	}
	for k, p := range q.Periods {
		if slices.IndexFunc(q.Periods, func(o counting.Period) bool { return o.Unit == p.Unit }) != k {
			return apierr.Invalid("%speriods: one %s on writes (the longest of the caps)", ItemPlace(i), p.Unit)
		}
	}
	return nil
}

// checkPeriods validates the periods of a query: units day, week, month,
// n from 2 to the periods kept, each named once.
func checkPeriods(ps []counting.Period, prefix string) error {
	if len(ps) > MaxWindows {
		return apierr.Invalid("%speriods takes at most %d", prefix, MaxWindows)
	}
	for i, p := range ps {
		kind := PeriodKind(p.Unit)
		if kind == "" {
			return apierr.Invalid("%speriods[%d].unit must be day, week or month", prefix, i)
		}
		if most := core.MaxPeriods[kind]; p.N < 2 || int64(p.N) > most {
			return apierr.Invalid("%speriods[%d].n must be between 2 and %d (1 is the day, week or month itself)", prefix, i, most)
		}
		if slices.Index(ps, p) != i {
			return apierr.Invalid("%speriods[%d] is named twice", prefix, i)
		}
	}
	return nil
}

// sortDims puts dimensions in configured order, so answers and key order do
// not depend on how the caller listed them.
func (p *Parser) sortDims(ds []Dim) {
	slices.SortFunc(ds, func(a, b Dim) int {
		return slices.Index(p.dims, a.Name) - slices.Index(p.dims, b.Name)
	})
}

// unknownParam names every parameter the endpoint takes.
func (p *Parser) unknownParam(name string, extra map[string]*string) error {
	own := slices.Sorted(maps.Keys(extra))
	valid := append([]string{"cid", "event", "eid", "windowHours", "paceWindowSec", "week", "month"}, own...)
	return apierr.Invalid("unknown parameter %q: the parameters are %s and the dimensions %s",
		name, strings.Join(valid, ", "), strings.Join(p.dims, ", "))
}

func (p *Parser) windowErr(prefix string, lo int) error {
	return apierr.Invalid("%swindowHours must be between %d and %d", prefix, lo, p.maxWindow)
}

func (p *Parser) validate(q *Query, prefix string) error {
	if q.CID == "" {
		return apierr.Invalid("%scid is required", prefix)
	}
	if !ids.ValidCID(q.CID) {
		return apierr.Invalid("%scid must be %s", prefix, ids.CIDRule)
	}
	if !slices.Contains(p.events, q.Event) {
		return apierr.Invalid("%sevent must be one of %v", prefix, p.events)
	}
	if len(q.Dims) == 0 {
		return apierr.Invalid("%sat least one dimension is required (%v)", prefix, p.dims)
	}
	for _, d := range q.Dims {
		if !ids.ValidID(d.ID) {
			if prefix != "" {
				return apierr.Invalid("%sdims.%s must be %s", prefix, d.Name, ids.IDRule)
			}
			return apierr.Invalid("%s must be %s", d.Name, ids.IDRule)
		}
	}
	if q.EID != "" && !ids.ValidID(q.EID) {
		return apierr.Invalid("%seid must be %s", prefix, ids.IDRule)
	}
	return nil
}
