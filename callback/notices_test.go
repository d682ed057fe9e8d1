package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/shared/counting"
)

var testSchema = &counting.Schema{Dimensions: []string{"device", "bundle", "tagid"}, Events: []string{"win", "billing"},
	MaxWindowHours: 168, MaxPaceWindowSec: 604800, MaxBatch: 1000}

func TestParseNotice(t *testing.T) {
	dims := testSchema.Dimensions
	tests := []struct {
		raw    string
		reason string // "" when accepted
		msg    string
		query  string // the notice as a counter query (see counterQuery), when accepted
		event  string // win when empty
	}{
		{raw: "cid=42&device=abc&bundle=com.foo&eid=a1:i1&price=1.2&foo=bar", query: "cid=42&event=win&device=abc&bundle=com.foo&eid=a1%3Ai1"},
		{raw: "cid=42&tagid=7", query: "cid=42&event=win&tagid=7&eid=cb-"},
		{raw: "cid=42&device=&bundle=b", query: "cid=42&event=win&bundle=b&eid=cb-"},
		{raw: "device=abc", reason: "invalid", msg: "cid is required"},
		{raw: "cid=4:2&device=abc", reason: "invalid", msg: "cid must be"},
		{raw: "cid=42", reason: "invalid", msg: "at least one dimension"},
		{raw: "cid=42&devise=abc", reason: "invalid", msg: "at least one dimension"},
		{raw: "cid=42&device=a%20b", reason: "invalid", msg: "device must be"},
		{raw: "cid=${CAMPAIGN_ID}&device=abc", reason: "macro", msg: "cid is an unsubstituted macro"},
		{raw: "cid=42&device=${DEVICE_ID}", reason: "macro", msg: "device is an unsubstituted macro"},
		{raw: "cid=42&device=abc&eid=${AUCTION_ID}:${AUCTION_IMP_ID}", reason: "macro", msg: "eid is an unsubstituted macro"},
		{raw: "cid=42&device=abc&eid=AUDIT", reason: "audit", msg: "AUDIT"},
		{raw: "cid=42&bundle=AUDIT", reason: "audit", msg: "AUDIT"},
		// Only the whole value is the exchange's placeholder.
		{raw: "cid=42&bundle=com.AUDITbooks.reader&eid=AUDIT-1", query: "cid=42&event=win&bundle=com.AUDITbooks.reader&eid=AUDIT-1"},
		{raw: "cid=42&device=abc", event: "imp", reason: "invalid", msg: "the counter counts no imp events (it counts win, billing)"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			form, err := url.ParseQuery(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			event := tt.event
			if event == "" {
				event = "win"
			}
			n, rej := parseNotice(event, testSchema, form)
			if tt.reason == "" {
				if rej != nil {
					t.Fatalf("rejected: %s %v", rej.reason, rej.err)
				}
				if q := counterQuery(n, dims); !strings.HasPrefix(q, tt.query) {
					t.Errorf("query %q, want prefix %q", q, tt.query)
				}
				return
			}
			if rej == nil {
				t.Fatalf("accepted %q, want rejection %s", counterQuery(n, dims), tt.reason)
			}
			if rej.reason != tt.reason || !strings.Contains(rej.err.Error(), tt.msg) {
				t.Errorf("rejection %s %q, want %s containing %q", rej.reason, rej.err, tt.reason, tt.msg)
			}
		})
	}
}

// counterQuery writes a notice as /v1/incr's query: cid, event, the
// dimensions in configured order, eid.
func counterQuery(n notice, dims []string) string {
	q := "cid=" + n.cid + "&event=" + n.event
	for _, d := range dims {
		if v, ok := n.dims[d]; ok {
			q += "&" + d + "=" + url.QueryEscape(v)
		}
	}
	return q + "&eid=" + url.QueryEscape(n.eid)
}

// TestNoticesBeforeTheSchemaIsKnown: a notice taken before the counter has
// told its schema keeps every parameter named like a dimension; the
// forwarder keeps the dimensions among them, checked, once it knows.
func TestNoticesBeforeTheSchemaIsKnown(t *testing.T) {
	form, _ := url.ParseQuery("cid=42&device=abc&price=0.42&Weird=1&ua=a%20b&eid=x")
	n, rej := parseNotice("win", nil, form)
	if rej != nil {
		t.Fatal(rej.err)
	}
	if len(n.dims) != 3 || n.dims["device"] != "abc" || n.dims["price"] != "0.42" || n.dims["ua"] != "a b" {
		t.Fatalf("kept %v, want device, price and ua", n.dims)
	}
	dims, rej := pickDimensions(testSchema, n.dims)
	if rej != nil || len(dims) != 1 || dims["device"] != "abc" {
		t.Fatalf("picked %v (%v), want device only", dims, rej)
	}
	if _, rej := parseNotice("win", nil, url.Values{"cid": {"42"}, "Price": {"1"}}); rej == nil || !strings.Contains(rej.err.Error(), "at least one dimension") {
		t.Errorf("a notice without any parameter named like a dimension: %v", rej)
	}
	for raw, reason := range map[string]string{"device=${DEVICE}": "macro", "device=a%20b": "invalid", "price=1": "invalid", "bundle=AUDIT": "audit"} {
		form, _ := url.ParseQuery("cid=42&" + raw)
		n, rej := parseNotice("win", nil, form)
		if rej != nil {
			t.Fatalf("%s before the schema is known: %v", raw, rej.err)
		}
		if _, rej := pickDimensions(testSchema, n.dims); rej == nil || rej.reason != reason {
			t.Errorf("%s once the schema is known: %v, want %s", raw, rej, reason)
		}
	}
}
