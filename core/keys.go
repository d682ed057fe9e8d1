package core

// The Redis key layout of every counter.
//
// Every key of one counter is prefix:{<tag>}[:suffix], and the tag is the
// counter's Redis Cluster hash tag, so one script touches one slot:
//
//	campaign  <event>:<dim>:<cid>:<id>
//	level     <event>:<dim>:<level>=<level id>:<id>  (advertiser, io, creative)
//	business  b:<business id>:<key>
//	limiter   p:<policy>:<key>
//
// Ids and keys are escaped (% : { } as %25 %3A %7B %7D): a tag holds no '}'
// (so the hash tag is the whole tag), its parts no ':', and two different
// counters never share a key. Ordinary ids are unchanged.

import (
	"strconv"
	"strings"

	"github.com/freqcap/freqcap/shared/counting"
)

// Escape makes s safe as one part of a key; it does not allocate when
// there is nothing to escape.
func Escape(s string) string {
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

// Tagged returns prefix + "{" + tag + "}" for the item's counter, built
// with one allocation: reads build keys for every item of a batch.
func Tagged(prefix string, it *counting.Item) string {
	if it.Scope.Policy != "" {
		return prefix + "{p:" + it.Scope.Policy + ":" + Escape(it.Subject.ID) + "}"
	}
	if it.Scope.Business != 0 {
		return prefix + "{b:" + strconv.FormatUint(uint64(it.Scope.Business), 10) + ":" + Escape(it.Subject.ID) + "}"
	}
	if l := it.Scope.Level; l != "" {
		// advertiser=<id>: '=' is not in a campaign id, so no level's
		// counter shares a campaign's key.
		return prefix + "{" + it.Scope.Event + ":" + it.Subject.Dim + ":" + l + "=" + it.Scope.Campaign + ":" + Escape(it.Subject.ID) + "}"
	}
	return prefix + "{" + it.Scope.Event + ":" + it.Subject.Dim + ":" + it.Scope.Campaign + ":" + Escape(it.Subject.ID) + "}"
}

// Window is the String of a day or seconds counter, with a TTL to the end
// of its window: freq:{<tag>} for a campaign, gfreq:{<tag>} for a business.
func Window(it *counting.Item) string {
	if it.Scope.Business != 0 {
		return Tagged("gfreq:", it)
	}
	return Tagged("freq:", it)
}

// Hours is the Hash of hour buckets, hfreq:{<tag>}, field = epoch hour.
func Hours(it *counting.Item) string { return Tagged("hfreq:", it) }

// Sliding is the ZSet of one exact window, sfreq:{<tag>}:<spanSec>, member
// = event id, score = unix ms. The span is part of the key, so each window
// keeps exactly its own events and no writer trims another's.
func Sliding(it *counting.Item) string {
	return Tagged("sfreq:", it) + ":" + strconv.FormatInt(it.Spec.Span, 10)
}

// Dedupe is the set of the event ids counted on the counters of the item's
// tag (lua/count.lua).
func Dedupe(it *counting.Item) string { return Tagged("dedup:", it) }
