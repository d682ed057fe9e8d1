package core

import (
	"fmt"
	"testing"
	"time"
)

func TestHotKeysFindsTheKeyReadMost(t *testing.T) {
	h := newHotKeys(16, 100, time.Second)
	for i := range 2000 {
		if i%8 == 0 {
			h.observe("bot") // 250 sampled reads (about 2,000 a second): far above 100
		}
		h.observe(fmt.Sprint("dev-", i)) // 2000 keys sampled once
	}
	h.observe("warm")
	h.rotate()
	if !h.isHot("bot") || h.isHot("warm") || h.isHot("dev-1") || h.size() != 1 {
		t.Fatalf("hot set after the window: bot %v warm %v size %d", h.isHot("bot"), h.isHot("warm"), h.size())
	}
	if l := h.list(); len(l) == 0 || l[0].Key != "bot" || !l[0].Hot || l[0].Rate < 1000 {
		t.Errorf("list: %+v", l)
	}
	h.rotate() // a window without reads: nothing is hot any more
	if h.isHot("bot") || h.size() != 0 {
		t.Error("bot still hot after a window without reads")
	}
	var off *hotKeys
	off.observe("x")
	if off.isHot("x") || off.size() != 0 || len(off.list()) != 0 {
		t.Error("a disabled sketch answered")
	}
}
