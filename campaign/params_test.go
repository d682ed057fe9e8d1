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
