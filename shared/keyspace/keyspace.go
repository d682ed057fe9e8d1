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
	"strconv"
	"strings"
	"sync/atomic"

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

// ReadHours is the command that sums the last Spec.Span hours up to hour,
// whose hash fields fields gives (HourFields.Of).
func ReadHours(b rueidis.Builder, it *counting.Item, fields []string) rueidis.Cacheable {
	return b.Hmget().Key(Hours(it)).Field(fields...).Cache()
}

// GotHours decodes ReadHours's answer: the sum of its last span buckets
// (the newest hours), so that one HMGET of the widest window of a counter
// answers its narrower ones too.
func GotHours(rs []rueidis.RedisResult, span int64, r *counting.Result) error {
	vals, err := rs[0].ToArray()
	if err != nil {
		return err
	}
	if int64(len(vals)) > span {
		vals = vals[int64(len(vals))-span:]
	}
	var sum int64
	for _, v := range vals {
		if v.IsNil() {
			continue
		}
		n, err := v.AsInt64()
		if err != nil {
			return err
		}
		sum += n
	}
	r.Count = sum
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

// HourFields formats the hash fields of hour buckets once an hour instead
// of on every read. It is safe for concurrent use.
type HourFields struct {
	keep int // fields formatted at least, the hours every hash keeps
	cur  atomic.Pointer[hourFields]
}

type hourFields struct {
	hour int64
	all  []string // hour-len(all)+1 .. hour
}

// NewHourFields formats at least keep hours at a time.
func NewHourFields(keep int) *HourFields { return &HourFields{keep: keep} }

// Of returns the hash fields of the n hours up to hour (epoch hours),
// oldest first.
func (h *HourFields) Of(hour int64, n int) []string {
	hf := h.cur.Load()
	if hf == nil || hf.hour != hour || len(hf.all) < n {
		hf = &hourFields{hour: hour, all: make([]string, max(n, h.keep))}
		for k := range hf.all {
			hf.all[k] = strconv.FormatInt(hour-int64(len(hf.all))+1+int64(k), 10)
		}
		h.cur.Store(hf)
	}
	return hf.all[len(hf.all)-n:]
}
