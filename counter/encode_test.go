package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
)

// The hand encoder of read answers writes counting.Answer's JSON: decoded,
// it is what campaign.AnswerOf (the client's direct mode) builds for the
// same query and result, fresh, stale and degraded alike.
func TestAnswerJSONIsTheContract(t *testing.T) {
	q := &Query{CID: "42", Event: "win", Windows: []int{2, 24}, PaceWindowSec: 600, Week: true, Month: true, LifetimeEnd: 1796210000, Periods: []counting.Period{{Unit: "day", N: 3}, {Unit: "month", N: 2}},
		Dims: []Dim{{Name: "device", ID: "d"}, {Name: "bundle", ID: "b"}}}
	fresh := &Result{Counts: []campaign.Counts{
		{Day: 3, Windows: []int64{1, 2}, Pace: counting.Pace{Count: 1, LastAt: 1796210000123}, Week: 5, Month: 9, Lifetime: 11, Periods: []int64{7, 30}},
		{Day: 9, Windows: []int64{4, 8}, Week: 12, Month: 30, Periods: []int64{20, 60}},
	}}
	stale := *fresh
	stale.Stale, stale.AgeMs = true, 1200
	failed := &Result{Counts: make([]campaign.Counts, 2), Err: &apierr.Error{Code: apierr.Timeout, Msg: "counts unavailable\nscript: ..."}}
	failed.Counts[0].Windows, failed.Counts[1].Windows = []int64{0, 0}, []int64{0, 0}
	failed.Counts[0].Periods, failed.Counts[1].Periods = []int64{0, 0}, []int64{0, 0}
	for name, r := range map[string]*Result{"fresh": fresh, "stale": &stale, "degraded": failed} {
		a := answer{q: q, res: r, read: true, degraded: r.Err != nil}
		if r.Err != nil {
			a.code, a.msg = campaign.ReadCode(r.Err), core.FirstLine(r.Err)
		}
		var got counting.Answer
		if err := json.Unmarshal(a.appendJSON(nil), &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := campaign.AnswerOf(q, r); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n encoded %+v\n answer  %+v", name, got, want)
		}
	}
	// A query without windows answers "windowHours":[] in both; a level
	// counter names its level.
	plain := &Query{CID: "7", Event: "imp", Level: counting.LevelAdvertiser, Dims: []Dim{{Name: "tagid", ID: "t"}}}
	pr := &Result{Counts: []campaign.Counts{{Day: 1}}}
	var got counting.Answer
	if err := json.Unmarshal((&answer{q: plain, res: pr, read: true}).appendJSON(nil), &got); err != nil {
		t.Fatal(err)
	}
	if want := campaign.AnswerOf(plain, pr); !reflect.DeepEqual(got, want) {
		t.Errorf("no windows:\n encoded %+v\n answer  %+v", got, want)
	}
}
