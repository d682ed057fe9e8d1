package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/lua"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/ids"
)

// The scripts are loaded once per process; Exec sends EVALSHA and falls back
// to EVAL when the server answers NOSCRIPT.
var (
	incrScript   = rueidis.NewLuaScript(lua.Incr)
	paceScript   = rueidis.NewLuaScript(lua.Pace)
	unpaceScript = rueidis.NewLuaScript(lua.Unpace)
)

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
	jobs        chan *readJob
	maxWindow   int
	hours       atomic.Pointer[hourFields]
}

// Query names the counters of one campaign and event, one per dimension.
type Query struct {
	CID   string
	Event string
	Dims  []Dim
	// Windows are the hour windows asked for, ascending; writes take at
	// most one, and the hour hash is kept for the largest.
	Windows []int
	// PaceWindowSec > 0 records writes in the pace ZSet too, and makes
	// reads return the pace count and last event time.
	PaceWindowSec int
	EID           string
}

// maxWindow is the largest window asked for, 0 when none.
func (q *Query) maxWindow() int {
	if len(q.Windows) == 0 {
		return 0
	}
	return q.Windows[len(q.Windows)-1]
}

// Dim is one dimension of a query and the id counted in it.
type Dim struct {
	Name string
	ID   string
}

// Counts are one counter's values: today's count, the sum of the hour
// buckets of each window asked for (in Query.Windows order), and the pace
// window's count and newest event time when one was asked for.
type Counts struct {
	Day     int64
	Windows []int64
	Pace    Pace
}

// Pace is the state of one exact sliding window.
type Pace struct {
	Count  int64
	LastAt int64 // unix milliseconds of the newest event, 0 when none
}

// Result is the answer for one Query. Counts line up with Query.Dims. Err is
// set when a read could not be served; Counts are then zero.
type Result struct {
	Counts    []Counts
	Duplicate bool
	Err       error
}

// tag is the Redis Cluster hash tag shared by every key of one counter.
func tag(q *Query, d Dim) string { return key("", q, d) }

// key is prefix + tag(q, d), built with one allocation: reads build keys
// for every dimension of every item.
func key(prefix string, q *Query, d Dim) string {
	return prefix + "{" + q.Event + ":" + d.Name + ":" + q.CID + ":" + d.ID + "}"
}

func dayKey(t string) string  { return "freq:" + t }
func hourKey(t string) string { return "hfreq:" + t }
func paceKey(t string) string { return "sfreq:" + t }

// dayTTL is the time left until the end of now's day in loc, rounded up to
// whole milliseconds: the TTL never ends before the day does, and an event
// in the day's last instant still gets a positive one. Days are built from
// the calendar, so DST days last 23 or 25 h.
func dayTTL(now time.Time, loc *time.Location) time.Duration {
	l := now.In(loc)
	end := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
	return (end.Sub(now) + time.Millisecond - 1).Truncate(time.Millisecond)
}

func epochHour(now time.Time) int64 { return now.Unix() / 3600 }

// Incr counts one event for every dimension of q. Each dimension is one
// script run; they go out together so the request costs one round trip.
func (s *Store) Incr(ctx context.Context, q *Query) (Result, error) {
	now := s.now()
	member := q.EID
	if member == "" {
		member = ids.Random("r-")
	}
	args := []string{
		strconv.FormatInt(dayTTL(now, s.loc).Milliseconds(), 10),
		strconv.FormatInt(epochHour(now), 10),
		strconv.Itoa(q.maxWindow()),
		"0",
		strconv.FormatInt(int64(q.PaceWindowSec)*1000, 10),
		strconv.FormatInt(now.UnixMilli(), 10),
		member,
	}
	if q.EID != "" {
		args[3] = strconv.FormatInt(s.dedupeTTL.Milliseconds(), 10)
	}
	res := Result{Counts: make([]Counts, len(q.Dims))}
	dup := make([]bool, len(q.Dims))
	err := s.eachDim(q, func(i int, t string) error {
		keys := []string{dayKey(t), hourKey(t), "dedup:" + t + ":" + q.EID, paceKey(t)}
		v, err := incrScript.Exec(ctx, s.rdb, keys, args).AsIntSlice()
		if err == nil && len(v) != 3 {
			err = fmt.Errorf("incr script returned %d values", len(v))
		}
		if err != nil {
			return err
		}
		res.Counts[i].Day = v[0]
		if len(q.Windows) > 0 {
			res.Counts[i].Windows = []int64{v[1]}
		}
		dup[i] = v[2] == 1
		return nil
	})
	if err != nil {
		s.metrics.redisErrors.WithLabelValues("incr").Inc()
		return Result{}, unavailable(err)
	}
	if slices.Contains(dup, true) {
		res.Duplicate = true
		s.metrics.duplicates.Inc()
	}
	return res, nil
}

// eachDim runs f for every dimension of q concurrently: concurrent script
// runs share rueidis's auto-pipeline, so together they cost one round trip.
func (s *Store) eachDim(q *Query, f func(i int, tag string) error) error {
	errs := make([]error, len(q.Dims))
	var wg sync.WaitGroup
	for i := 1; i < len(q.Dims); i++ {
		wg.Go(func() { errs[i] = f(i, tag(q, q.Dims[i])) })
	}
	errs[0] = f(0, tag(q, q.Dims[0]))
	wg.Wait()
	return errors.Join(errs...)
}

func unavailable(err error) error {
	return &apierr.Error{Code: apierr.Unavailable, Msg: "redis unavailable, retry: " + firstLine(err)}
}

// PaceRule is an exact sliding window cap: at most Limit events in the last
// Window, and none closer than MinGap to the previous one.
type PaceRule struct {
	Window time.Duration
	Limit  int
	MinGap time.Duration
}

// Pace outcomes, as the seed's script returns them.
const (
	PaceAllowed   = 1
	PaceOverLimit = 0
	PaceTooSoon   = -1
)

// PaceResult is the outcome of a pace check for every dimension of a query.
type PaceResult struct {
	Result    int // PaceAllowed, PaceOverLimit or PaceTooSoon: the first refusal in dimension order
	Dims      []PaceDim
	Duplicate bool
}

// PaceDim is one dimension's outcome.
type PaceDim struct {
	Result int
	Pace
}

// Pace checks and records one event in the exact sliding window of every
// dimension of q. It is all-or-nothing: when any dimension refuses, the
// event is taken back from the dimensions that recorded it.
func (s *Store) Pace(ctx context.Context, q *Query, rule PaceRule) (PaceResult, error) {
	now := s.now().UnixMilli()
	member := q.EID
	if member == "" {
		member = ids.Random("r-")
	}
	args := []string{
		strconv.FormatInt(now, 10),
		strconv.FormatInt(rule.Window.Milliseconds(), 10),
		strconv.Itoa(rule.Limit),
		strconv.FormatInt(rule.MinGap.Milliseconds(), 10),
		member,
	}
	res := PaceResult{Result: PaceAllowed, Dims: make([]PaceDim, len(q.Dims))}
	dup := make([]bool, len(q.Dims))
	prev := make([]int64, len(q.Dims))
	err := s.eachDim(q, func(i int, t string) error {
		v, err := paceScript.Exec(ctx, s.rdb, []string{paceKey(t)}, args).AsIntSlice()
		if err == nil && len(v) != 5 {
			err = fmt.Errorf("pace script returned %d values", len(v))
		}
		if err != nil {
			return err
		}
		res.Dims[i] = PaceDim{Result: int(v[0]), Pace: Pace{Count: v[1], LastAt: v[2]}}
		dup[i] = v[3] == 1
		prev[i] = v[4]
		return nil
	})
	refused := slices.IndexFunc(res.Dims, func(d PaceDim) bool { return d.Result != PaceAllowed })
	if err != nil || refused >= 0 {
		// Take back what was recorded by this call (not replays of an
		// earlier one), so a refused or failed event leaves nothing behind.
		score := strconv.FormatInt(now, 10)
		undo := s.eachDim(q, func(i int, t string) error {
			if res.Dims[i].Result != PaceAllowed || dup[i] || res.Dims[i].LastAt != now {
				return nil
			}
			return unpaceScript.Exec(ctx, s.rdb, []string{paceKey(t)}, []string{member, score}).Error()
		})
		err = errors.Join(err, undo)
	}
	if err != nil {
		s.metrics.redisErrors.WithLabelValues("pace").Inc()
		return PaceResult{}, unavailable(err)
	}
	if refused >= 0 {
		res.Result = res.Dims[refused].Result
		for i := range res.Dims {
			if res.Dims[i].Result == PaceAllowed && !dup[i] {
				res.Dims[i].Count--
				res.Dims[i].LastAt = prev[i]
			}
		}
	}
	res.Duplicate = !slices.Contains(dup, false)
	return res, nil
}

// Read answers every query with one pipelined round trip per Redis node:
// cached dimensions through client-side caching, the others straight from
// Redis. It returns within the read timeout whatever Redis does; what could
// not be read in time carries Err and zero counts (failing open is the
// caller's decision).
func (s *Store) Read(ctx context.Context, qs []Query) []Result {
	ctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	j := &readJob{ctx: ctx, qs: qs, done: make(chan []Result, 1)}
	select {
	case s.jobs <- j:
	default:
		// Every reader is stuck on a hung Redis and the queue is full:
		// answer now rather than pile up.
		s.metrics.redisErrors.WithLabelValues("read").Inc()
		return failAll(qs, errReadersBusy)
	}
	select {
	case res := <-j.done:
		return res
	case <-ctx.Done():
		// rueidis may block past the context in some reconnect paths; the
		// caller's deadline wins.
		s.metrics.redisErrors.WithLabelValues("read").Inc()
		return failAll(qs, ctx.Err())
	}
}

// readJob is one Read handed to a reader goroutine.
type readJob struct {
	ctx  context.Context
	qs   []Query
	done chan []Result
}

// readers is how many goroutines serve reads, and how many more reads may
// wait for one. Long-lived readers keep their grown stacks, so a read costs
// no goroutine start, and a hung Redis holds at most this many.
const readers = 256

var errReadersBusy = errors.New("every reader is waiting on redis")

func (s *Store) startReaders() {
	s.jobs = make(chan *readJob, readers)
	for range readers {
		go func() {
			for j := range s.jobs {
				j.done <- s.read(j.ctx, j.qs)
			}
		}()
	}
}

// Close stops the readers.
func (s *Store) Close() { close(s.jobs) }

func failAll(qs []Query, err error) []Result {
	res := newResults(qs)
	for i := range res {
		res[i].Err = err
	}
	return res
}

// newResults makes zero results shaped after their queries.
func newResults(qs []Query) []Result {
	res := make([]Result, len(qs))
	for i := range qs {
		res[i].Counts = make([]Counts, len(qs[i].Dims))
		if n := len(qs[i].Windows); n > 0 {
			for j := range res[i].Counts {
				res[i].Counts[j].Windows = make([]int64, n)
			}
		}
	}
	return res
}

// part is which piece of a counter one read command fetches.
type part uint8

const (
	partDay      part = iota // GET of the day String
	partWindows              // HMGET of the hour fields of the largest window
	partPaceCnt              // ZCOUNT of the pace window
	partPaceLast             // newest member of the pace ZSet
)

// slot says where one command's answer goes: query q, dimension d, part p.
type slot struct {
	q, d int
	p    part
}

// hourFields are the hash fields of the largest window for one hour,
// formatted once an hour instead of on every read.
type hourFields struct {
	hour int64
	all  []string // hour-maxWindow+1 .. hour
}

// fields returns the hash fields of the n hours up to hour, oldest first.
func (s *Store) fields(hour int64, n int) []string {
	hf := s.hours.Load()
	if hf == nil || hf.hour != hour || len(hf.all) < n {
		hf = &hourFields{hour: hour, all: make([]string, max(n, s.maxWindow))}
		for k := range hf.all {
			hf.all[k] = strconv.FormatInt(hour-int64(len(hf.all))+1+int64(k), 10)
		}
		s.hours.Store(hf)
	}
	return hf.all[len(hf.all)-n:]
}

func (s *Store) read(ctx context.Context, qs []Query) []Result {
	now := s.now()
	hour := epochHour(now)
	cached := make([]rueidis.CacheableTTL, 0, 2*len(qs))
	direct := make(rueidis.Commands, 0, 2*len(qs))
	cachedAt := make([]slot, 0, 2*len(qs))
	directAt := make([]slot, 0, 2*len(qs))
	for i := range qs {
		q := &qs[i]
		var fields []string
		if n := q.maxWindow(); n > 0 {
			fields = s.fields(hour, n)
		}
		for j, d := range q.Dims {
			add := func(c rueidis.Cacheable, p part) {
				if s.cached[d.Name] {
					cached = append(cached, rueidis.CT(c, s.cacheTTL))
					cachedAt = append(cachedAt, slot{i, j, p})
				} else {
					direct = append(direct, rueidis.Completed(c))
					directAt = append(directAt, slot{i, j, p})
				}
			}
			add(s.rdb.B().Get().Key(key("freq:", q, d)).Cache(), partDay)
			if fields != nil {
				add(s.rdb.B().Hmget().Key(key("hfreq:", q, d)).Field(fields...).Cache(), partWindows)
			}
			if q.PaceWindowSec > 0 {
				// The window's lower bound moves every millisecond: caching
				// these would only fill the cache, so they go straight to Redis.
				pk := key("sfreq:", q, d)
				from := strconv.FormatInt(now.UnixMilli()-int64(q.PaceWindowSec)*1000, 10)
				direct = append(direct,
					s.rdb.B().Zcount().Key(pk).Min(from).Max("+inf").Build(),
					s.rdb.B().Zrange().Key(pk).Min("-1").Max("-1").Withscores().Build())
				directAt = append(directAt, slot{i, j, partPaceCnt}, slot{i, j, partPaceLast})
			}
		}
	}

	res := newResults(qs)
	var cachedRes, directRes []rueidis.RedisResult
	switch {
	case len(cached) > 0 && len(direct) > 0:
		var wg sync.WaitGroup
		wg.Go(func() { cachedRes = s.rdb.DoMultiCache(ctx, cached...) })
		directRes = s.rdb.DoMulti(ctx, direct...)
		wg.Wait()
	case len(cached) > 0:
		cachedRes = s.rdb.DoMultiCache(ctx, cached...)
	default:
		directRes = s.rdb.DoMulti(ctx, direct...)
	}
	var hits, misses int
	for k, r := range cachedRes {
		if r.IsCacheHit() {
			hits++
		} else {
			misses++
		}
		s.fill(qs, res, cachedAt[k], r)
	}
	s.metrics.cacheHits.Add(float64(hits))
	s.metrics.cacheMisses.Add(float64(misses))
	for k, r := range directRes {
		s.fill(qs, res, directAt[k], r)
	}
	for i := range res {
		if res[i].Err != nil {
			s.metrics.redisErrors.WithLabelValues("read").Inc()
			for j := range res[i].Counts {
				c := &res[i].Counts[j]
				c.Day, c.Pace = 0, Pace{}
				clear(c.Windows)
			}
		}
	}
	return res
}

// fill stores one command's answer in its result.
func (s *Store) fill(qs []Query, res []Result, at slot, r rueidis.RedisResult) {
	item := &res[at.q]
	if item.Err != nil {
		return
	}
	c := &item.Counts[at.d]
	var err error
	switch at.p {
	case partDay:
		c.Day, err = r.AsInt64()
		if rueidis.IsRedisNil(err) {
			err = nil
		}
	case partWindows:
		err = sumWindows(r, qs[at.q].Windows, c.Windows)
	case partPaceCnt:
		c.Pace.Count, err = r.AsInt64()
	case partPaceLast:
		var zs []rueidis.ZScore
		if zs, err = r.AsZScores(); err == nil && len(zs) > 0 {
			c.Pace.LastAt = int64(zs[0].Score)
		}
	}
	if err != nil {
		item.Err = err
	}
}

// sumWindows sums the HMGET answer (fields oldest to newest, as many as the
// largest window) into one total per window: the last w fields for window w.
func sumWindows(r rueidis.RedisResult, windows []int, out []int64) error {
	vals, err := r.ToArray()
	if err != nil {
		return err
	}
	for k := len(vals) - 1; k >= 0; k-- {
		if vals[k].IsNil() {
			continue
		}
		n, err := vals[k].AsInt64()
		if err != nil {
			return err
		}
		age := len(vals) - k // 1 for the current hour
		for w, hours := range windows {
			if age <= hours {
				out[w] += n
			}
		}
	}
	return nil
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
