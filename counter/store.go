package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/lua"
	"github.com/freqcap/freqcap/shared/apierr"
)

// incrScript is loaded once per process; Exec sends EVALSHA and falls back
// to EVAL when the server answers NOSCRIPT.
var incrScript = rueidis.NewLuaScript(lua.Incr)

// Store owns every Redis key and command of the counter.
type Store struct {
	rdb         rueidis.Client
	loc         *time.Location
	now         func() time.Time
	cached      map[string]bool
	cacheTTL    time.Duration
	dedupeTTL   time.Duration
	readTimeout time.Duration
	metrics     *metrics
}

// Query names the counters of one campaign and event, one per dimension.
type Query struct {
	CID         string
	Event       string
	Dims        []Dim
	WindowHours int
	EID         string
}

// Dim is one dimension of a query and the id counted in it.
type Dim struct {
	Name string
	ID   string
}

// Counts are one counter's values: today's count and, when a window was
// asked for, the sum of its hour buckets.
type Counts struct {
	Day    int64
	Window int64
}

// Result is the answer for one Query. Counts line up with Query.Dims. Err is
// set when a read could not be served; Counts are then zero.
type Result struct {
	Counts    []Counts
	Duplicate bool
	Err       error
}

// tag is the Redis Cluster hash tag shared by every key of one counter.
func tag(q *Query, d Dim) string {
	return "{" + q.Event + ":" + d.Name + ":" + q.CID + ":" + d.ID + "}"
}

func dayKey(t string) string  { return "freq:" + t }
func hourKey(t string) string { return "hfreq:" + t }

// dayTTL is the time left until the end of now's day in loc, rounded up to
// whole milliseconds so that an event in the day's last instant still gets a
// positive TTL. Days are built from the calendar, so DST days last 23 or 25 h.
func dayTTL(now time.Time, loc *time.Location) time.Duration {
	l := now.In(loc)
	end := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
	return max(end.Sub(now).Round(time.Millisecond), time.Millisecond)
	// Round, not Truncate: the TTL must never end before the day does.
}

func epochHour(now time.Time) int64 { return now.Unix() / 3600 }

// Incr counts one event for every dimension of q. Each dimension is one
// script run; they go out together so the request costs one round trip.
func (s *Store) Incr(ctx context.Context, q *Query) (Result, error) {
	now := s.now()
	args := []string{
		strconv.FormatInt(dayTTL(now, s.loc).Milliseconds(), 10),
		strconv.FormatInt(epochHour(now), 10),
		strconv.Itoa(q.WindowHours),
		"0",
	}
	if q.EID != "" {
		args[3] = strconv.FormatInt(s.dedupeTTL.Milliseconds(), 10)
	}
	res := Result{Counts: make([]Counts, len(q.Dims))}
	errs := make([]error, len(q.Dims))
	dup := make([]bool, len(q.Dims))
	run := func(i int) {
		t := tag(q, q.Dims[i])
		keys := []string{dayKey(t), hourKey(t), "dedup:" + t + ":" + q.EID}
		v, err := incrScript.Exec(ctx, s.rdb, keys, args).AsIntSlice()
		if err == nil && len(v) != 3 {
			err = fmt.Errorf("incr script returned %d values", len(v))
		}
		if err != nil {
			errs[i] = err
			return
		}
		res.Counts[i] = Counts{Day: v[0], Window: v[1]}
		dup[i] = v[2] == 1
	}
	// Concurrent Exec calls share rueidis's auto-pipeline: one round trip.
	var wg sync.WaitGroup
	for i := 1; i < len(q.Dims); i++ {
		wg.Go(func() { run(i) })
	}
	run(0)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.metrics.redisErrors.WithLabelValues("incr").Inc()
		return Result{}, &apierr.Error{Code: apierr.Unavailable, Msg: "redis unavailable, retry: " + firstLine(err)}
	}
	for _, d := range dup {
		if d {
			res.Duplicate = true
			s.metrics.duplicates.Inc()
			break
		}
	}
	return res, nil
}

// Read answers every query with one pipelined round trip per Redis node:
// cached dimensions through client-side caching, the others straight from
// Redis. It returns within the read timeout whatever Redis does; what could
// not be read in time carries Err and zero counts (failing open is the
// caller's decision).
func (s *Store) Read(ctx context.Context, qs []Query) []Result {
	ctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	done := make(chan []Result, 1)
	go func() {
		defer cancel()
		done <- s.read(ctx, qs)
	}()
	timer := time.NewTimer(s.readTimeout)
	defer timer.Stop()
	select {
	case res := <-done:
		return res
	case <-timer.C:
		// rueidis may block past the context in some reconnect paths; the
		// caller's deadline wins.
		s.metrics.redisErrors.WithLabelValues("read").Inc()
		return failAll(qs, context.DeadlineExceeded)
	}
}

func failAll(qs []Query, err error) []Result {
	res := make([]Result, len(qs))
	for i := range qs {
		res[i] = Result{Counts: make([]Counts, len(qs[i].Dims)), Err: err}
	}
	return res
}

// slot says where one command's answer goes: query i, dimension j, and
// whether it is the day GET or the window HMGET.
type slot struct {
	q, d   int
	window bool
}

func (s *Store) read(ctx context.Context, qs []Query) []Result {
	hour := epochHour(s.now())
	var cached []rueidis.CacheableTTL
	var direct rueidis.Commands
	var cachedAt, directAt []slot
	for i := range qs {
		q := &qs[i]
		var fields []string
		if q.WindowHours > 0 {
			fields = make([]string, q.WindowHours)
			for k := range fields {
				fields[k] = strconv.FormatInt(hour-int64(q.WindowHours)+1+int64(k), 10)
			}
		}
		for j, d := range q.Dims {
			t := tag(q, d)
			add := func(c rueidis.Cacheable, at slot) {
				if s.cached[d.Name] {
					cached = append(cached, rueidis.CT(c, s.cacheTTL))
					cachedAt = append(cachedAt, at)
				} else {
					direct = append(direct, rueidis.Completed(c))
					directAt = append(directAt, at)
				}
			}
			add(s.rdb.B().Get().Key(dayKey(t)).Cache(), slot{i, j, false})
			if fields != nil {
				add(s.rdb.B().Hmget().Key(hourKey(t)).Field(fields...).Cache(), slot{i, j, true})
			}
		}
	}

	res := make([]Result, len(qs))
	for i := range qs {
		res[i].Counts = make([]Counts, len(qs[i].Dims))
	}
	var cachedRes []rueidis.RedisResult
	var wg sync.WaitGroup
	if len(cached) > 0 {
		wg.Go(func() { cachedRes = s.rdb.DoMultiCache(ctx, cached...) })
	}
	var directRes []rueidis.RedisResult
	if len(direct) > 0 {
		directRes = s.rdb.DoMulti(ctx, direct...)
	}
	wg.Wait()
	var hits, misses int
	for k, r := range cachedRes {
		if r.IsCacheHit() {
			hits++
		} else {
			misses++
		}
		s.fill(res, cachedAt[k], r)
	}
	s.metrics.cacheHits.Add(float64(hits))
	s.metrics.cacheMisses.Add(float64(misses))
	for k, r := range directRes {
		s.fill(res, directAt[k], r)
	}
	for i := range res {
		if res[i].Err != nil {
			clear(res[i].Counts)
		}
	}
	return res
}

// fill stores one command's answer in its result.
func (s *Store) fill(res []Result, at slot, r rueidis.RedisResult) {
	item := &res[at.q]
	if item.Err != nil {
		return
	}
	if !at.window {
		n, err := r.AsInt64()
		if err != nil && !rueidis.IsRedisNil(err) {
			s.metrics.redisErrors.WithLabelValues("read").Inc()
			item.Err = err
			return
		}
		item.Counts[at.d].Day = n
		return
	}
	vals, err := r.ToArray()
	if err != nil {
		s.metrics.redisErrors.WithLabelValues("read").Inc()
		item.Err = err
		return
	}
	var sum int64
	for _, v := range vals {
		if v.IsNil() {
			continue
		}
		n, err := v.AsInt64()
		if err != nil {
			item.Err = err
			return
		}
		sum += n
	}
	item.Counts[at.d].Window = sum
}

// Ping reports whether Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.rdb.Do(ctx, s.rdb.B().Ping().Build()).Error()
}

func firstLine(err error) string {
	msg := err.Error()
	for i := range len(msg) {
		if msg[i] == '\n' {
			return msg[:i]
		}
	}
	return msg
}
