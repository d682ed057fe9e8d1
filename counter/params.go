package main

import (
	"net/url"
	"slices"
	"strconv"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/ids"
)

// parser validates requests against the configured dimensions and events.
type parser struct {
	dims      []string
	events    []string
	maxWindow int
}

func newParser(s Settings) *parser {
	return &parser{dims: s.Dimensions, events: s.Events, maxWindow: s.MaxWindowHours}
}

// fromURL reads one query from URL parameters. Every parameter must be known
// and given once: typos in an internal API must not pass silently.
func (p *parser) fromURL(vals url.Values) (Query, error) {
	q := Query{Event: p.events[0]}
	for name, vs := range vals {
		if len(vs) != 1 {
			return q, apierr.Invalid("%s must be given once", name)
		}
		v := vs[0]
		switch name {
		case "cid":
			q.CID = v
		case "event":
			q.Event = v
		case "eid":
			q.EID = v
		case "windowHours":
			n, err := strconv.Atoi(v)
			if err != nil {
				return q, p.windowErr("")
			}
			q.WindowHours = n
		default:
			if !slices.Contains(p.dims, name) {
				return q, apierr.Invalid("unknown parameter %q (dimensions: %v)", name, p.dims)
			}
			q.Dims = append(q.Dims, Dim{Name: name, ID: v})
		}
	}
	p.sortDims(q.Dims)
	return q, p.validate(&q, "")
}

// batchItem is one item of POST /v1/freq/batch.
type batchItem struct {
	CID         string            `json:"cid"`
	Event       string            `json:"event"`
	Dims        map[string]string `json:"dims"`
	WindowHours int               `json:"windowHours"`
}

// fromItem turns a batch item into a query; field names in errors are
// prefixed with the item's place, e.g. items[3].windowHours.
func (p *parser) fromItem(it batchItem, prefix string) (Query, error) {
	q := Query{CID: it.CID, Event: it.Event, WindowHours: it.WindowHours}
	if q.Event == "" {
		q.Event = p.events[0]
	}
	for name, id := range it.Dims {
		if !slices.Contains(p.dims, name) {
			return q, apierr.Invalid("%sdims: unknown dimension %q (dimensions: %v)", prefix, name, p.dims)
		}
		q.Dims = append(q.Dims, Dim{Name: name, ID: id})
	}
	p.sortDims(q.Dims)
	return q, p.validate(&q, prefix)
}

// sortDims puts dimensions in configured order, so answers and key order do
// not depend on how the caller listed them.
func (p *parser) sortDims(ds []Dim) {
	slices.SortFunc(ds, func(a, b Dim) int {
		return slices.Index(p.dims, a.Name) - slices.Index(p.dims, b.Name)
	})
}

func (p *parser) windowErr(prefix string) error {
	return apierr.Invalid("%swindowHours must be between 0 and %d", prefix, p.maxWindow)
}

func (p *parser) validate(q *Query, prefix string) error {
	if !ids.ValidCID(q.CID) {
		return apierr.Invalid("%scid must be %s", prefix, ids.CIDRule)
	}
	if !slices.Contains(p.events, q.Event) {
		return apierr.Invalid("%sevent must be one of %v", prefix, p.events)
	}
	if q.WindowHours < 0 || q.WindowHours > p.maxWindow {
		return p.windowErr(prefix)
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
