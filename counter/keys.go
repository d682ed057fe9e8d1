package main

import (
	"strconv"
	"strings"

	"github.com/freqcap/freqcap/shared/counting"
)

// Keys: every key of one counter is prefix:{<tag>}[:suffix], and the tag is
// the counter's Redis Cluster hash tag, so one script touches one slot.
//
//	campaign  <event>:<dim>:<cid>:<id>
//	business  b:<business id>:<key>
//	limiter   p:<policy>:<key>
//
// Ids and keys are escaped (% : { } as %25 %3A %7B %7D): a tag holds no '}'
// (so the hash tag is the whole tag), its parts no ':', and two different
// counters never share a key. Ordinary ids are unchanged.

// escape makes s safe as one part of a key; it does not allocate when
// there is nothing to escape.
func escape(s string) string {
	if !strings.ContainsAny(s, "%:{}") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := range len(s) {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// tagged returns prefix + "{" + tag + "}" for the item's counter, built
// with one allocation: reads build keys for every item of a batch.
func tagged(prefix string, it *counting.Item) string {
	if it.Scope.Policy != "" {
		return prefix + "{p:" + it.Scope.Policy + ":" + escape(it.Subject.ID) + "}"
	}
	if it.Scope.Business != 0 {
		return prefix + "{b:" + strconv.FormatUint(uint64(it.Scope.Business), 10) + ":" + escape(it.Subject.ID) + "}"
	}
	return prefix + "{" + it.Scope.Event + ":" + it.Subject.Dim + ":" + it.Scope.Campaign + ":" + escape(it.Subject.ID) + "}"
}

// dedupeKey is the set of the event ids counted on the counters of the
// item's tag (lua/count.lua).
func dedupeKey(it *counting.Item) string { return tagged("dedup:", it) }
