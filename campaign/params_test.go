package campaign

import (
	"reflect"
	"strings"
	"testing"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
)

// FuzzCheckRead checks that a read built from its parts (the client's
// Decide in direct mode) is the query ReadItem makes of the same item, and
// is refused where ReadItem refuses it.
func FuzzCheckRead(f *testing.F) {
	f.Add("42", "", "device", "6f1c2a", "3,24", 0)
	f.Add("42", "imp", "bundle", "com.example", "", 600)
	f.Add("a:b", "win", "device", "x", "3", 0)
	f.Add("42", "click", "device", "x", "", 0)
	f.Add("42", "win", "household", "x", "", 0)
	f.Add("42", "win", "device", "", "", 0)
	f.Add("42", "win", "device", "x", "0,3", 0)
	f.Add("42", "win", "device", "x", "3,3,169", 0)
	f.Add("42", "win", "device", "x", "1,2,3,4,5,6,7,8,9,10,11", 0)
	f.Add("42", "win", "device", "x", "24,3,24", -1)
	f.Add("42", "win", "device", "x", "", 3601)
	f.Add("42", "win", "tagid", "x y", "", 0)
	l := core.Limits{Dimensions: []string{"device", "bundle", "tagid"}, Events: []string{"win", "billing", "imp"}, MaxHours: 168, MaxSliding: 3600}
	p := NewParser(&l)
	f.Fuzz(func(t *testing.T, cid, event, dim, id, windows string, pace int) {
		var hours []int
		for _, w := range strings.Split(windows, ",") {
			if w != "" {
				hours = append(hours, len(w)*7%200+int(w[0])%5-2) // small numbers, some out of range
			}
		}
		want, wantErr := p.ReadItem(counting.BatchItem{CID: cid, Event: event, Dims: map[string]string{dim: id}, WindowHours: hours, PaceWindowSec: pace}, 0)
		q := Query{CID: cid, Event: event, Dims: []Dim{{Name: dim, ID: id}}, PaceWindowSec: pace, Windows: make([]int, 0, len(hours))}
		ok := p.CheckRead(&q, hours)
		if ok != (wantErr == nil) {
			t.Fatalf("CheckRead %v, ReadItem's error %v", ok, wantErr)
		}
		if len(q.Windows) == 0 {
			q.Windows = nil // no windows, as ReadItem leaves them
		}
		if ok && !reflect.DeepEqual(q, want) {
			t.Fatalf("CheckRead made\n%+v\nReadItem\n%+v", q, want)
		}
	})
}

// An item's errors name its place in the batch (and a level's its place
// among the item's levels), though the place is made only for an item
// that is refused.
func TestItemErrorsNameTheirPlace(t *testing.T) {
	l := core.Limits{Dimensions: []string{"device", "bundle", "tagid"}, Events: []string{"win", "billing", "imp"}, MaxHours: 168, MaxSliding: 3600}
	p := NewParser(&l)
	dims := map[string]string{"device": "d", "bundle": "b"}
	for _, tt := range []struct {
		it    counting.BatchItem
		write bool
		want  string
	}{
		{it: counting.BatchItem{CID: "42", Dims: dims, WindowHours: []int{500}}, want: "items[3].windowHours must be between 1 and 168"},
		{it: counting.BatchItem{CID: "42", Dims: map[string]string{"device": ""}}, want: "items[3].dims.device must be"},
		{it: counting.BatchItem{CID: "a:b", Dims: dims}, want: "items[3].cid must be"},
		{it: counting.BatchItem{CID: "42", Dims: dims, Levels: []counting.LevelCount{{Level: "advertiser", ID: "acme", Dims: []string{"device"}},
			{Level: "io", ID: "io1", Dims: []string{"tagid"}}}}, write: true, want: `items[3].levels[1].dims: "tagid" is not one of the item's dimensions`},
		{it: counting.BatchItem{CID: "42", Dims: dims, WindowHours: []int{3, 24}}, write: true, want: "items[3].windowHours takes one window on writes"},
		{it: counting.BatchItem{CID: "42", Dims: dims, Levels: []counting.LevelCount{{Level: "advertiser", ID: "acme", Dims: []string{"device"}, WindowHours: []int{3, 24}}}},
			write: true, want: "items[3].windowHours takes one window on writes"},
		{it: counting.BatchItem{CID: "42", Dims: dims, Periods: []counting.Period{{Unit: "day", N: 2}, {Unit: "day", N: 3}}}, write: true, want: "items[3].periods: one day on writes"},
	} {
		q, err := p.FromItem(tt.it, 3)
		if err == nil && tt.write {
			err = q.CheckWrite(3)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.it, err, tt.want)
		}
	}
	// And an item that is taken is taken whole.
	q, err := p.FromItem(counting.BatchItem{CID: "42", Dims: dims, WindowHours: []int{3}, EID: "e1",
		Levels: []counting.LevelCount{{Level: "advertiser", ID: "acme", Dims: []string{"device"}, WindowHours: []int{24}}}}, 3)
	if err == nil {
		err = q.CheckWrite(3)
	}
	if err != nil || len(q.Dims) != 2 || len(q.Also) != 1 || q.Also[0].CID != "acme" || q.Also[0].Windows[0] != 24 {
		t.Errorf("a valid write: %+v, %v", q, err)
	}
}
