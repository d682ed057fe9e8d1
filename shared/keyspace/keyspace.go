// Package keyspace is the counter's Redis key layout and the commands that
// read the counters of seed 000: the natural day (and the business window),
// the hour buckets and the exact sliding window. The counter reads with it,
// and so does the Go client's direct mode, so the two cannot read different
// keys or decode them differently.
//
// Every key of one counter is prefix:{<tag>}[:suffix], and the tag is the
// counter's Redis Cluster hash tag, so one script touches one slot:
//
//	campaign  <event>:<dim>:<cid>:<id>
//	business  b:<business id>:<key>
//	limiter   p:<policy>:<key>
//
// Ids and keys are escaped (% : { } as %25 %3A %7B %7D): a tag holds no '}'
// (so the hash tag is the whole tag), its parts no ':', and two different
// counters never share a key. Ordinary ids are unchanged.
package keyspace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/apierr"
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

// ReadWindow is the commands that read a day or seconds counter; cacheable
// is false when a cached answer would be wrong.
func ReadWindow(b rueidis.Builder, it *counting.Item) (cmds []rueidis.Cacheable, cacheable bool) {
	key := Window(it)
	get := b.Get().Key(key).Cache()
	if it.Scope.Campaign != "" {
		// A campaign's day window always ends at the end of today.
		return []rueidis.Cacheable{get}, true
	}
	// The TTL shrinks every millisecond: a cached one would be wrong.
	return []rueidis.Cacheable{get, b.Pttl().Key(key).Cache()}, false
}

// GotWindow decodes ReadWindow's answers: the count, and the TTL when it
// was read. A counter with no live window answers KeyNotFound and 0.
func GotWindow(rs []rueidis.RedisResult, r *counting.Result) error {
	n, err := rs[0].AsInt64()
	if rueidis.IsRedisNil(err) {
		r.Code, r.Msg = apierr.KeyNotFound, "no live window"
		return nil
	}
	if err != nil {
		return err
	}
	r.Count = n
	if len(rs) == 1 {
		return nil
	}
	ttl, err := rs[1].AsInt64()
	if err != nil {
		return err
	}
	r.TTLMs = max(ttl, 0)
	return nil
}

// ReadHours is the command that reads a counter's hour buckets: the whole
// hash, which holds only the hours that had events (at most R+1 of them).
// It does not depend on the hour or the window, so one answer (and one
// cached copy) serves every window of the counter, this hour and the next.
func ReadHours(b rueidis.Builder, it *counting.Item) rueidis.Cacheable {
	return b.Hgetall().Key(Hours(it)).Cache()
}

// bucket is one hour bucket of a counter: its epoch hour and count.
type bucket struct{ Hour, N int64 }

// hourBuckets decodes ReadHours's answer into its buckets, decoded once
// for all the windows of a counter.
func hourBuckets(rs []rueidis.RedisResult) ([]bucket, error) {
	m, err := rs[0].AsIntMap()
	if err != nil {
		return nil, err
	}
	out := make([]bucket, 0, len(m))
	for f, n := range m {
		h, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hour bucket %q: %w", f, err)
		}
		out = append(out, bucket{h, n})
	}
	return out, nil
}

// sumHours is the sum of the buckets of the span hours up to hour.
func sumHours(bs []bucket, hour, span int64) int64 {
	var sum int64
	for _, b := range bs {
		if b.Hour > hour-span && b.Hour <= hour {
			sum += b.N
		}
	}
	return sum
}

// HoursMemo decodes the answer the windows of one counter share once:
// consecutive windows read the same result.
type HoursMemo struct {
	at      *rueidis.RedisResult
	buckets []bucket
	err     error
}

// Got sets r.Count to the sum of the span hours up to hour of
// ReadHours's answer rs.
func (m *HoursMemo) Got(rs []rueidis.RedisResult, hour, span int64, r *counting.Result) error {
	if m.at != &rs[0] {
		m.at = &rs[0]
		m.buckets, m.err = hourBuckets(rs)
	}
	if m.err != nil {
		return m.err
	}
	r.Count = sumHours(m.buckets, hour, span)
	return nil
}

// ReadSliding is the commands that read an exact window at nowMs: its
// count and its newest event. Its bounds move every millisecond, so it is
// never cached.
func ReadSliding(b rueidis.Builder, it *counting.Item, nowMs int64) []rueidis.Cacheable {
	k := Sliding(it)
	from := strconv.FormatInt(nowMs-it.Spec.Span*1000, 10)
	return []rueidis.Cacheable{
		b.Zcount().Key(k).Min(from).Max("+inf").Cache(),
		// The newest event still in the window; an older one is forgotten.
		b.Zrange().Key(k).Min("+inf").Max(from).Byscore().Rev().Limit(0, 1).Withscores().Cache(),
	}
}

// GotSliding decodes ReadSliding's answers: the count and LastAt.
func GotSliding(rs []rueidis.RedisResult, r *counting.Result) error {
	n, err := rs[0].AsInt64()
	if err != nil {
		return err
	}
	zs, err := rs[1].AsZScores()
	if err != nil {
		return err
	}
	r.Count = n
	if len(zs) > 0 {
		r.LastAt = int64(zs[0].Score)
	}
	return nil
}
