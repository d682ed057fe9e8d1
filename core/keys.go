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

	"github.com/freqcap/freqcap/shared/counting"
)

// Escape makes s safe as one part of a key; it does not allocate when
// there is nothing to escape.
func Escape(s string) string {
	if plainPrefix(s) == len(s) {
		return s
	}
	return string(appendEscaped(make([]byte, 0, len(s)+8), s))
}

// Tagged returns prefix + "{" + tag + "}" for the item's counter, built
// with one allocation: reads build keys for every item of a batch.
func Tagged(prefix string, it *counting.Item) string {
	var buf [128]byte
	return string(AppendTagged(buf[:0], prefix, it))
}

// AppendTagged appends Tagged(prefix, it) to b.
func AppendTagged(b []byte, prefix string, it *counting.Item) []byte {
	b = append(b, prefix...)
	switch {
	case it.Scope.Policy != "":
		b = append(append(append(b, "{p:"...), it.Scope.Policy...), ':')
	case it.Scope.Business != 0:
		b = append(strconv.AppendUint(append(b, "{b:"...), uint64(it.Scope.Business), 10), ':')
	case it.Scope.Level != "":
		// advertiser=<id>: '=' is not in a campaign id, so no level's
		// counter shares a campaign's key.
		b = append(append(append(b, '{'), it.Scope.Event...), ':')
		b = append(append(append(b, it.Subject.Dim...), ':'), it.Scope.Level...)
		b = append(append(append(b, '='), it.Scope.Campaign...), ':')
	default:
		b = append(append(append(b, '{'), it.Scope.Event...), ':')
		b = append(append(append(b, it.Subject.Dim...), ':'), it.Scope.Campaign...)
		b = append(b, ':')
	}
	return append(appendEscaped(b, it.Subject.ID), '}')
}

// escaped marks the bytes Escape replaces.
var escaped = [256]bool{'%': true, ':': true, '{': true, '}': true}

// plainPrefix is how many of s's first bytes need no escape.
func plainPrefix(s string) int {
	i := 0
	for i < len(s) && !escaped[s[i]] {
		i++
	}
	return i
}

// appendEscaped appends Escape(s) to b: what precedes the first byte to
// escape (all of an ordinary id) in one copy, then the rest a byte at a
// time.
func appendEscaped(b []byte, s string) []byte {
	i := plainPrefix(s)
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b = append(b, "%25"...)
		case ':':
			b = append(b, "%3A"...)
		case '{':
			b = append(b, "%7B"...)
		case '}':
			b = append(b, "%7D"...)
		default:
			b = append(b, c)
		}
	}
	return b
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
