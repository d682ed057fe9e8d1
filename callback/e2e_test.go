package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"sigs.k8s.io/yaml"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/proctest"
	"github.com/freqcap/freqcap/shared/redistest"
	"github.com/freqcap/freqcap/shared/signing"
)

// bins holds the counter and callback binaries, built once for the run.
var bins string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "freqcap-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := proctest.Build(dir, "./counter", "./callback"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stack is redis-server, counter and callback as real processes.
type stack struct {
	t           *testing.T
	redis       *redistest.Server
	rc          rueidis.Client
	counter     *proctest.Proc
	callback    *proctest.Proc
	counterAddr string
	counterOps  string // the counter's ops listener (metrics)
	public      string
	admin       string
	// redisURL, when set, is the services' REDIS_URL (credentials).
	redisURL string
}

func (s *stack) url() string {
	if s.redisURL != "" {
		return s.redisURL
	}
	return s.redis.URL()
}

func newRedisClient(t testing.TB, srv *redistest.Server) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func startStack(t *testing.T, callbackEnv ...string) *stack {
	t.Helper()
	return startStackOn(t, redistest.Start(t), callbackEnv...)
}

// startStackOn is startStack on a Redis the test started.
func startStackOn(t *testing.T, srv *redistest.Server, callbackEnv ...string) *stack {
	t.Helper()
	return startStackWith(t, srv, nil, callbackEnv)
}

// startStackWith is startStackOn with settings of the counter too.
func startStackWith(t *testing.T, srv *redistest.Server, counterEnv, callbackEnv []string) *stack {
	t.Helper()
	s := newStack(t, srv)
	s.startCounter(counterEnv...)
	s.callback = s.startCallback(callbackEnv...)
	return s
}

// newStack is a stack on srv with its addresses, nothing started yet.
func newStack(t *testing.T, srv *redistest.Server) *stack {
	t.Helper()
	s := &stack{t: t, redis: srv, counterAddr: proctest.FreeAddr(t), public: proctest.FreeAddr(t), admin: proctest.FreeAddr(t)}
	s.rc = newRedisClient(t, s.redis)
	return s
}

func (s *stack) startCounter(env ...string) {
	s.t.Helper()
	s.counterOps = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(s.t))
	s.counter = proctest.Start(s.t, filepath.Join(bins, "counter"), "http://"+s.counterAddr+"/healthz",
		proctest.CounterEnv(s.counterAddr, s.counterOps, s.url(), append([]string{"COUNTER_WRITE_TIMEOUT=500ms", "COUNTER_READ_TIMEOUT=2s"}, env...)...)...)
}

func (s *stack) startCallback(env ...string) *proctest.Proc {
	s.t.Helper()
	return proctest.Start(s.t, filepath.Join(bins, "callback"), "http://"+s.admin+"/healthz",
		proctest.CallbackEnv(s.public, s.admin, "http://"+s.counterAddr, s.url(), append([]string{"CALLBACK_RETRY_MAX=200ms"}, env...)...)...)
}

func (s *stack) do(method, url, body string) (int, http.Header, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if strings.HasPrefix(body, "{") || strings.HasPrefix(body, "[") {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// get reads one raw key as an integer (0 when absent).
func (s *stack) get(key string) int64 {
	s.t.Helper()
	v, err := s.rc.Do(context.Background(), s.rc.B().Get().Key(key).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		s.t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func (s *stack) exists(key string) bool {
	s.t.Helper()
	n, err := s.rc.Do(context.Background(), s.rc.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		s.t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

// waitKey waits until key holds want, and fails if it goes past it.
func (s *stack) waitKey(key string, want int64, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := s.get(key)
		if got == want {
			return
		}
		if got > want {
			s.t.Fatalf("%s = %d, more than the %d notices sent", key, got, want)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s = %d after %s, want %d", key, got, within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEndToEnd(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin
	pub := "http://" + s.public

	if code, _, body := s.do("PUT", admin+"/v1/campaigns/42", `{"winLimitHours":3}`); code != 200 {
		t.Fatalf("put campaign: %d %s", code, body)
	}
	if code, _, body := s.do("GET", admin+"/v1/campaigns/42", ""); code != 200 || !strings.Contains(body, `"winLimitHours":3`) {
		t.Fatalf("get campaign: %d %s", code, body)
	}
	s.do("PUT", admin+"/v1/campaigns/7", `{"winLimitHours":0}`)
	s.do("PUT", admin+"/v1/campaigns/8", `{"winLimitHours":2,"paceWindowSec":600}`)

	// Win notices: windowHours goes along only for winLimitHours > 0.
	for _, u := range []string{
		"/win?cid=42&device=d1&bundle=com.foo&eid=a1:1&price=0.42",
		"/win?cid=7&device=d1&eid=a2:1",
		"/win?cid=unknown&device=d1",
	} {
		if code, _, body := s.do("GET", pub+u, ""); code != 204 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
	}
	s.waitKey("freq:{win:device:42:d1}", 1, 5*time.Second)
	s.waitKey("freq:{win:bundle:42:com.foo}", 1, 5*time.Second)
	s.waitKey("freq:{win:device:7:d1}", 1, 5*time.Second)
	s.waitKey("freq:{win:device:unknown:d1}", 1, 5*time.Second)
	if !s.exists("hfreq:{win:device:42:d1}") {
		t.Error("campaign 42 (winLimitHours 3): no hour bucket")
	}
	// paceWindowSec goes along for campaigns that have one: the event is
	// recorded once per eid in the pace ZSet. The resend follows once the
	// first is counted, as an exchange's does.
	s.do("GET", pub+"/win?cid=8&device=d1&eid=p1", "")
	s.waitMetric(`freqcap_callback_forwarded_total{result="counted"} 4`, 5*time.Second)
	s.do("GET", pub+"/win?cid=8&device=d1&eid=p1", "")
	s.waitKey("freq:{win:device:8:d1}", 1, 5*time.Second)
	if n, err := s.rc.Do(context.Background(), s.rc.B().Zcard().Key("sfreq:{win:device:8:d1}:600").Build()).AsInt64(); err != nil || n != 1 {
		t.Errorf("pace ZSet of campaign 8: %d members (%v), want 1", n, err)
	}
	for _, k := range []string{"hfreq:{win:device:7:d1}", "hfreq:{win:device:unknown:d1}", "sfreq:{win:device:42:d1}:600"} {
		if s.exists(k) {
			t.Errorf("%s written for a campaign without winLimitHours", k)
		}
	}
	code, _, body := s.do("GET", "http://"+s.counterAddr+"/v1/freq?cid=42&device=d1&windowHours=3", "")
	if code != 200 || !strings.Contains(body, `"device":{"day":1,"windows":{"3":1}}`) {
		t.Errorf("counter read: %d %s", code, body)
	}

	// The same eid again (an exchange's resend) is counted once.
	for range 3 {
		s.do("POST", pub+"/win?cid=42&device=d1&bundle=com.foo&eid=a1:1", "")
	}
	s.do("POST", pub+"/billing?cid=42&device=d1&eid=a1:1", "")
	s.waitKey("freq:{billing:device:42:d1}", 1, 5*time.Second)
	// One replay of campaign 8's notice above, three of campaign 42's here.
	s.waitMetric(`freqcap_callback_forwarded_total{result="duplicate"} 4`, 5*time.Second)
	if n := s.get("freq:{win:device:42:d1}"); n != 1 {
		t.Errorf("duplicate eids counted %d times, want once", n)
	}

	// Impression pixel.
	code, h, body := s.do("GET", pub+"/imp?cid=42&tagid=t9&eid=a3:1", "")
	if code != 200 || h.Get("Content-Type") != "image/gif" || !strings.HasPrefix(body, "GIF89a") || !strings.Contains(h.Get("Cache-Control"), "no-store") {
		t.Errorf("pixel: %d %v %q", code, h, body)
	}
	s.waitKey("freq:{imp:tagid:42:t9}", 1, 5*time.Second)

	// Bad notices: 400 with the JSON error, nothing counted.
	before := dbsize(t, s)
	for u, msg := range map[string]string{
		"/win?device=d1": "cid is required",
		"/win?cid=42":    "at least one dimension",
		"/win?cid=42&device=d1&eid=${AUCTION_ID}": "unsubstituted macro",
		"/imp?cid=42&device=AUDIT":                "AUDIT",
		"/billing?cid=${CID}&device=d1":           "unsubstituted macro",
	} {
		code, _, body := s.do("GET", pub+u, "")
		if code != 400 || !strings.Contains(body, `"code":10003`) || !strings.Contains(body, msg) {
			t.Errorf("GET %s: %d %s, want 400 naming %q", u, code, body, msg)
		}
	}
	s.waitSettled(10 * time.Second)
	if after := dbsize(t, s); after != before {
		t.Errorf("bad notices changed Redis: %d keys before, %d after", before, after)
	}

	// Metrics tell the story: the journal is empty once all is delivered.
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 5*time.Second)
	_, _, metrics := s.do("GET", admin+"/metrics", "")
	for _, want := range []string{
		`freqcap_callback_notices_accepted_total{event="win"}`,
		`freqcap_callback_notices_rejected_total{event="win",reason="macro"}`,
		`freqcap_callback_notices_rejected_total{event="imp",reason="audit"}`,
		`freqcap_callback_unknown_campaigns_total 1`,
		`freqcap_callback_journal_up 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// A campaign edited by hand into something unreadable is reported, not read as zeros.
	if err := s.rc.Do(context.Background(), s.rc.B().Hset().Key("campaign:{bad}").FieldValue().FieldValue("winLimitHours", "lots").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if code, _, body := s.do("GET", admin+"/v1/campaigns/bad", ""); code != 500 || !strings.Contains(body, "winLimitHours") {
		t.Errorf("unreadable campaign: %d %s, want 500 naming winLimitHours", code, body)
	}

	if code, _, _ := s.do("DELETE", admin+"/v1/campaigns/42", ""); code != 204 {
		t.Errorf("delete campaign: %d", code)
	}
	if code, _, body := s.do("GET", admin+"/v1/campaigns/42", ""); code != 404 || !strings.Contains(body, `"code":10002`) {
		t.Errorf("get deleted campaign: %d %s", code, body)
	}
	if code, _, body := s.do("PUT", admin+"/v1/campaigns/42", `{"winLimitHours":-1}`); code != 400 || !strings.Contains(body, "winLimitHours must be") {
		t.Errorf("bad campaign: %d %s", code, body)
	}
}

// waitMetric waits until callback's /metrics holds the line want.
func (s *stack) waitMetric(want string, within time.Duration) {
	s.t.Helper()
	s.waitMetricAt("http://"+s.admin+"/metrics", want, within)
}

// waitMetricAt waits until the metrics at url hold the line want.
func (s *stack) waitMetricAt(url, want string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, _, body := s.do("GET", url, "")
		if strings.Contains(body, want+"\n") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("/metrics has no %q after %s", want, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSettled waits until the journal holds nothing undelivered or
// pending: every notice callback took has been answered for by the counter
// (counted, a duplicate, or dropped), so counts no longer move.
func (s *stack) waitSettled(within time.Duration) {
	s.t.Helper()
	s.waitMetric("freqcap_callback_journal_undelivered 0", within)
	s.waitMetric("freqcap_callback_journal_pending 0", within)
}

// dbsize is the keys in Redis: on every master of a cluster.
func dbsize(t *testing.T, s *stack) int64 {
	t.Helper()
	var sum int64
	for _, out := range s.redis.OnMasters(t, "DBSIZE") {
		n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	return sum
}

// TestCampaignChangeReachesCallbackWithinASecond changes a campaign with a
// plain Redis command, as redis-cli would, and expects the next notices to
// follow it without a restart.
func TestCampaignChangeReachesCallbackWithinASecond(t *testing.T) {
	s := startStack(t)
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/9", `{"winLimitHours":0}`)
	s.do("GET", "http://"+s.public+"/win?cid=9&device=before", "")
	s.waitKey("freq:{win:device:9:before}", 1, 5*time.Second)
	if s.exists("hfreq:{win:device:9:before}") {
		t.Fatal("hour bucket written with winLimitHours 0")
	}
	if err := s.rc.Do(context.Background(), s.rc.B().Hset().Key("campaign:{9}").FieldValue().FieldValue("winLimitHours", "2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	for i := 0; ; i++ {
		dev := "after" + strconv.Itoa(i)
		sent := time.Since(changed)
		s.do("GET", "http://"+s.public+"/win?cid=9&device="+dev, "")
		s.waitKey("freq:{win:device:9:"+dev+"}", 1, 5*time.Second)
		if s.exists("hfreq:{win:device:9:" + dev + "}") {
			break
		}
		// A notice sent a second or more after the change must follow it.
		if sent >= time.Second {
			t.Fatalf("a notice sent %s after the campaign change still used the old campaign", sent)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sendAll sends n win notices with distinct eids for one device from a few
// concurrent senders, resending on 503 as an exchange would, and calls
// during(i) once when notice i is about to go. It returns how many answers
// were 503.
func sendAll(t *testing.T, pub, cid string, n int, during map[int]func()) int {
	t.Helper()
	return send(t, n, func(i int) string { return fmt.Sprintf("%s/win?cid=%s&device=dev&eid=e%d", pub, cid, i) }, during)
}

// send sends the notices url(0) .. url(n-1) as sendAll does.
func send(t *testing.T, n int, url func(i int) string, during map[int]func()) int {
	t.Helper()
	return sendTimed(t, n, url, during).refused
}

// sent is what sendTimed saw: the 503 answers, and when the first and the
// last came.
type sent struct {
	refused     int
	first, last time.Time
}

// sendTimed is send, saying when notices were refused.
func sendTimed(t *testing.T, n int, url func(i int) string, during map[int]func()) sent {
	t.Helper()
	var next, refused, first, last atomic.Int64
	var failed atomic.Value
	var hooks sync.Mutex
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				hooks.Lock()
				if f := during[i]; f != nil {
					delete(during, i)
					f()
				}
				hooks.Unlock()
				u := url(i)
				for attempt := 0; ; attempt++ {
					resp, err := client.Get(u)
					if err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusNoContent {
							break
						}
						if resp.StatusCode != http.StatusServiceUnavailable {
							failed.Store(fmt.Sprintf("notice %d: status %d", i, resp.StatusCode))
							return
						}
						if resp.Header.Get("Retry-After") == "" {
							failed.Store(fmt.Sprintf("notice %d: 503 without Retry-After", i))
							return
						}
						now := time.Now().UnixNano()
						first.CompareAndSwap(0, now)
						last.Store(now)
						refused.Add(1)
					}
					if attempt > 500 {
						failed.Store(fmt.Sprintf("notice %d never accepted: %v", i, err))
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatal(f)
	}
	r := sent{refused: int(refused.Load())}
	if r.refused > 0 {
		r.first, r.last = time.Unix(0, first.Load()), time.Unix(0, last.Load())
	}
	return r
}

func TestNoLossWhenCounterRestarts(t *testing.T) {
	s := startStack(t)
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/loss", `{"winLimitHours":2}`)
	sendAll(t, "http://"+s.public, "loss", 10_000, map[int]func(){
		3000: func() { s.counter.Kill() },
		5000: func() { s.startCounter() },
	})
	s.waitKey("freq:{win:device:loss:dev}", 10_000, 60*time.Second)
	s.waitSettled(30 * time.Second)
	s.waitKey("freq:{win:device:loss:dev}", 10_000, 0)
	// The retries while the counter was down were said, not only counted.
	if logs := s.callback.Logs(); !strings.Contains(logs, "counter write failed, retrying") {
		t.Errorf("callback logged no retry warning while the counter was down")
	}
}

func TestNoLossWhenRedisStalls(t *testing.T) {
	s := startStack(t)
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/stall", `{"winLimitHours":2}`)
	resumed := make(chan struct{})
	refused := sendAll(t, "http://"+s.public, "stall", 10_000, map[int]func(){
		3000: func() {
			s.redis.Pause()
			time.AfterFunc(2*time.Second, func() { s.redis.Resume(); close(resumed) })
		},
	})
	<-resumed
	// While Redis was frozen nothing could be persisted: the notices got
	// 503 and were sent again; every one acknowledged is counted once.
	if refused == 0 {
		t.Error("no notice was refused while Redis was frozen: 204 without persisting?")
	}
	s.waitKey("freq:{win:device:stall:dev}", 10_000, 60*time.Second)
	s.waitSettled(30 * time.Second)
	s.waitKey("freq:{win:device:stall:dev}", 10_000, 0)
}

// A full Redis (noeviction past maxmemory) takes no notice: each gets 503
// with Retry-After and nothing is kept; once Redis has room, the resends
// are counted exactly once.
func TestAFullRedisRefusesNotices(t *testing.T) {
	s := startStack(t)
	pub := "http://" + s.public
	url := func(i int) string { return fmt.Sprintf("%s/win?cid=full&device=dev&eid=full-%d", pub, i) }
	if code, _, body := s.do("GET", url(0), ""); code != http.StatusNoContent {
		t.Fatalf("before: %d %s", code, body)
	}
	s.waitKey("freq:{win:device:full:dev}", 1, 10*time.Second)
	s.redis.OnMasters(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	s.redis.OnMasters(t, "CONFIG", "SET", "maxmemory", "1mb")
	full, keys := s.redis.UsedMemory(t), dbsize(t, s)
	for i := 1; i <= 200; i++ {
		code, h, body := s.do("GET", url(i), "")
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Fatalf("notice %d into a full Redis: %d %q (Retry-After %q), want 503 with Retry-After", i, code, body, h.Get("Retry-After"))
		}
	}
	// Nothing was kept; what moves is the clients' buffers.
	if used := s.redis.UsedMemory(t); used > full+512<<10 {
		t.Errorf("used_memory grew from %d to %d in a full Redis", full, used)
	}
	if n := dbsize(t, s); n != keys {
		t.Errorf("%d keys in a full Redis that held %d", n, keys)
	}
	s.redis.OnMasters(t, "CONFIG", "SET", "maxmemory", "0")
	for range 2 {
		for i := 1; i <= 200; i++ {
			if code, _, body := s.do("GET", url(i), ""); code != http.StatusNoContent {
				t.Fatalf("notice %d with room again: %d %s", i, code, body)
			}
		}
	}
	s.waitKey("freq:{win:device:full:dev}", 201, 20*time.Second)
	s.waitMetric(`freqcap_callback_forwarded_total{result="duplicate"} 200`, 10*time.Second)
	s.waitKey("freq:{win:device:full:dev}", 201, 0)
}

// A notice whose key Redis refuses (a key of another type written over a
// counter's, here by hand) no longer blocks its partition: it moves to
// the dead-letter stream with its error, the partition goes on and every
// good notice is taken and counted; once the key is mended, the admin API
// replays it and it counts once.
func TestAPoisonNoticeGoesToTheDeadLetters(t *testing.T) {
	s := startStack(t, "CALLBACK_JOURNAL_PARTITIONS=1", "CALLBACK_JOURNAL_MAX=300")
	ctx := context.Background()
	if err := s.rc.Do(ctx, s.rc.B().Set().Key("dedup:{win:device:pp:bad}").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	pub, admin := "http://"+s.public, "http://"+s.admin
	if code, _, body := s.do("GET", pub+"/win?cid=pp&device=bad&eid=poison-1", ""); code != 204 {
		t.Fatalf("the poison notice: %d %s", code, body)
	}
	if refused := send(t, 1500, func(i int) string { return fmt.Sprintf("%s/win?cid=pp&device=good&eid=good-%d", pub, i) }, nil); refused > 0 {
		t.Logf("%d answers 503 while the counter caught up", refused)
	}
	s.waitKey("freq:{win:device:pp:good}", 1500, 30*time.Second)
	s.waitMetric("freqcap_callback_dead_lettered_total 1", 10*time.Second)
	s.waitMetric("freqcap_callback_journal_dead_letters 1", 10*time.Second)
	code, _, body := s.do("GET", admin+"/v1/deadletters", "")
	var page struct {
		DeadLetters []struct{ ID, EID, Error string } `json:"deadLetters"`
		Total       int                               `json:"total"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || code != 200 || page.Total != 1 || len(page.DeadLetters) != 1 ||
		page.DeadLetters[0].EID != "poison-1" || !strings.Contains(page.DeadLetters[0].Error, "WRONGTYPE") {
		t.Fatalf("GET /v1/deadletters: %d %s (%v)", code, body, err)
	}
	if code, _, body := s.do("GET", admin+"/v1/deadletters?limit=1&limt=2", ""); code != 400 || !strings.Contains(body, "limt") {
		t.Errorf("an unknown parameter: %d %s, want 400 naming it", code, body)
	}
	if err := s.rc.Do(ctx, s.rc.B().Del().Key("dedup:{win:device:pp:bad}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		// A journal still full of the good notices (trimmed once
		// delivered) answers 503, as a notice would: retry it.
		code, _, body := s.do("POST", admin+"/v1/deadletters/replay?id="+page.DeadLetters[0].ID, "")
		for deadline := time.Now().Add(10 * time.Second); code == 503 && strings.Contains(body, "journal full") && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
			code, _, body = s.do("POST", admin+"/v1/deadletters/replay?id="+page.DeadLetters[0].ID, "")
		}
		if code != 200 {
			t.Fatalf("replay: %d %s", code, body)
		}
	}
	s.waitKey("freq:{win:device:pp:bad}", 1, 10*time.Second)
	s.waitMetric("freqcap_callback_journal_dead_letters 0", 10*time.Second)
	if code, _, body := s.do("DELETE", admin+"/v1/deadletters/"+page.DeadLetters[0].ID, ""); code != 404 {
		t.Errorf("DELETE of a replayed dead letter: %d %s, want 404", code, body)
	}
}

// TestAcknowledgedNoticesSurviveSIGKILL: with the counter down, 5,000
// notices (half without an eid) are acknowledged; callback is killed with
// SIGKILL and started again, the counter comes back: exactly 5,000 are
// counted, at every level the campaign's caps count: its own, its
// advertiser's, its io's and each notice's creative's.
func TestAcknowledgedNoticesSurviveSIGKILL(t *testing.T) {
	env := []string{"CALLBACK_CLAIM_IDLE=1s"}
	s := startStack(t, env...)
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/crash", `{"advertiser":"acme","io":"io9","caps":[
		{"level":"advertiser","event":"win","window":{"unit":"day","n":1},"limit":9000},
		{"level":"io","event":"win","window":{"unit":"hours","n":2},"limit":9000},
		{"level":"creative","event":"win","window":{"unit":"day","n":1},"limit":9000}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	s.counter.Kill()
	pub := "http://" + s.public
	refused := send(t, 5000, func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("%s/win?cid=crash&crid=cr%d&device=dev&eid=e%d", pub, i%4/2, i)
		}
		return fmt.Sprintf("%s/win?cid=crash&crid=cr%d&device=dev", pub, i%4/2)
	}, nil)
	if refused > 0 {
		t.Fatalf("%d notices refused with the journal far from full", refused)
	}
	s.callback.Kill()
	s.callback = s.startCallback(env...)
	s.startCounter()
	s.waitKey("freq:{win:device:crash:dev}", 5000, 60*time.Second)
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 10*time.Second)
	s.waitKey("freq:{win:device:crash:dev}", 5000, 0)
	for key, want := range map[string]int64{"freq:{win:device:advertiser=acme:dev}": 5000, "freq:{win:device:io=io9:dev}": 5000,
		"freq:{win:device:creative=cr0:dev}": 2500, "freq:{win:device:creative=cr1:dev}": 2500} {
		s.waitKey(key, want, 0)
	}
	vals, err := s.rc.Do(t.Context(), s.rc.B().Hvals().Key("hfreq:{win:device:io=io9:dev}").Build()).AsIntSlice()
	var hours int64
	for _, v := range vals {
		hours += v
	}
	if err != nil || hours != 5000 {
		t.Errorf("the io's hour buckets hold %d (%v), want 5000", hours, err)
	}
}

// TestSIGTERMLeavesUndeliveredNoticesInTheJournal fills the journal while
// the counter is down (then notices get 503), stops callback, and starts a
// new one with the counter back: everything acknowledged is counted.
func TestSIGTERMLeavesUndeliveredNoticesInTheJournal(t *testing.T) {
	env := []string{"CALLBACK_JOURNAL_MAX=500", "CALLBACK_JOURNAL_PARTITIONS=2", "CALLBACK_WORKERS=4", "CALLBACK_DRAIN_TIMEOUT=1s", "CALLBACK_CLAIM_IDLE=1s"}
	s := startStack(t, env...)
	s.counter.Kill()
	accepted := 0
	for i := 0; ; i++ {
		code, h, body := s.do("GET", fmt.Sprintf("http://%s/win?cid=drain&device=dev&eid=e%d", s.public, i), "")
		if code == 503 {
			if h.Get("Retry-After") == "" || !strings.Contains(body, "journal full") {
				t.Errorf("a full journal: 503 %v %s, want Retry-After and the reason", h, body)
			}
			break
		}
		if code != 204 {
			t.Fatalf("notice %d: %d", i, code)
		}
		accepted++
	}
	// The bound is kept from lengths sampled every 100 ms plus this
	// instance's own appends: never more than the maximum, a few less
	// when a sample and an append cross.
	if accepted > 500 || accepted < 490 {
		t.Fatalf("the journal took %d notices before refusing, want its maximum of 500", accepted)
	}
	s.callback.Signal(syscall.SIGTERM)
	if err := s.callback.Wait(30 * time.Second); err != nil {
		t.Fatalf("callback exit: %v", err)
	}
	if !strings.Contains(s.callback.Logs(), "left in the journal") {
		t.Errorf("no log line of what was left:\n%s", s.callback.Logs())
	}
	s.startCounter()
	s.callback = s.startCallback(env...)
	s.waitKey("freq:{win:device:drain:dev}", int64(accepted), 30*time.Second)
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 10*time.Second)
}

// TestTwoCallbacksCountEveryNoticeOnce: two callbacks share the journal,
// each with a counter of its own, one writing entries of a field per
// value and the other of one field; notices sent to either are counted
// exactly once, and both deliver.
func TestTwoCallbacksCountEveryNoticeOnce(t *testing.T) {
	s := startStack(t)
	other := *s
	other.counterAddr = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	other.startCounter()
	other.public = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	other.admin = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	// The other writes journal entries of one field: each instance reads
	// what either wrote (a group moving to CALLBACK_JOURNAL_FORMAT=2).
	other.callback = other.startCallback("CALLBACK_JOURNAL_FORMAT=2")
	pubs := []string{"http://" + s.public, "http://" + other.public}
	send(t, 5000, func(i int) string {
		return fmt.Sprintf("%s/win?cid=two&device=dev&eid=e%d", pubs[i%2], i)
	}, nil)
	s.waitKey("freq:{win:device:two:dev}", 5000, 60*time.Second)
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 10*time.Second)
	s.waitKey("freq:{win:device:two:dev}", 5000, 0)
	for _, st := range []*stack{s, &other} {
		_, _, body := st.do("GET", "http://"+st.admin+"/metrics", "")
		if !strings.Contains(body, `freqcap_callback_forwarded_total{result="counted"}`) {
			t.Errorf("callback on %s delivered nothing", st.public)
		}
		_, _, body = st.do("GET", "http://"+st.counterOps+"/metrics", "")
		if !regexp.MustCompile(`freqcap_http_requests_total\{[^}]*route="/v1/incr/batch"[^}]*\} [1-9]`).MatchString(body) {
			t.Errorf("counter on %s counted no batch", st.counterAddr)
		}
	}
}

// TestNoticesOfSeveralPartitionsShareACounterRequest: 40 notices spread
// over the journal's 8 partitions within a batch wait are written with at
// most a few counter requests, not one (or more) per partition.
func TestNoticesOfSeveralPartitionsShareACounterRequest(t *testing.T) {
	s := startStack(t, "CALLBACK_JOURNAL_PARTITIONS=8", "CALLBACK_BATCH_WAIT=500ms")
	if n := send(t, 40, func(i int) string {
		return fmt.Sprintf("http://%s/win?cid=merge&device=d%d&eid=e%d", s.public, i, i)
	}, nil); n > 0 {
		t.Fatalf("%d notices refused", n)
	}
	s.waitMetric(`freqcap_callback_forwarded_total{result="counted"} 40`, 10*time.Second)
	_, _, body := s.do("GET", "http://"+s.counterOps+"/metrics", "")
	requests := 0
	for _, m := range regexp.MustCompile(`freqcap_http_requests_total\{[^}]*route="/v1/incr/batch"[^}]*\} (\d+)`).FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[1])
		requests += n
	}
	if requests < 1 || requests > 4 {
		t.Errorf("40 notices over 8 partitions took %d counter requests, want 1 to 4", requests)
	}
	for i := range 40 {
		s.waitKey(fmt.Sprintf("freq:{win:device:merge:d%d}", i), 1, 0)
	}
}

func TestPublicPortBoundsWhatItAccepts(t *testing.T) {
	s := startStack(t)
	pub := "http://" + s.public
	form := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(pub+"/win?cid=42&device=d9", "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := form("bundle=com.foo&" + strings.Repeat("x", 9000) + "=1"); code != 413 || !strings.Contains(body, "at most") {
		t.Errorf("a 9 KB body: %d %s, want 413", code, body)
	}
	if code, body := form("cid=43"); code != 400 || !strings.Contains(body, "cid is given in the query and in the body") {
		t.Errorf("a body overriding the query's cid: %d %s, want 400", code, body)
	}
	if code, body := form("cid=42&bundle=com.body"); code != 204 {
		t.Errorf("a body repeating the query's cid and adding a dimension: %d %s", code, body)
	}
	s.waitKey("freq:{win:bundle:42:com.body}", 1, 5*time.Second)
	if s.exists("freq:{win:device:43:d9}") {
		t.Error("a refused notice was counted")
	}
	// Headers are bounded too.
	req, _ := http.NewRequest("GET", pub+"/win?cid=42&device=d9", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 32<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("32 KB of headers: %d, want 431", resp.StatusCode)
	}
}

// TestARefusedNoticeIsDroppedAlone: notices travel in batches; one the
// counter refuses is dropped with its reason while the rest of its batch is
// counted. Here callback still holds the schema of a counter that counted
// region until it was restarted without it: the refusals make callback
// read the new schema, a notice with a device and a region is counted
// for its device (its region left out, in a metric), and only the notice
// left with no dimension the counter counts is dropped.
func TestARefusedNoticeIsDroppedAlone(t *testing.T) {
	s := newStack(t, redistest.Start(t))
	s.startCounter("COUNTER_DIMENSIONS=device,region", "COUNTER_CACHED_DIMENSIONS=region")
	s.callback = s.startCallback("CALLBACK_BATCH_WAIT=200ms", "CALLBACK_WORKERS=1", "CALLBACK_SCHEMA_REFRESH=1h")
	s.counter.Kill()
	s.startCounter()
	pub := "http://" + s.public
	for _, u := range []string{"/win?cid=5&device=b1", "/win?cid=5&region=eu", "/win?cid=5&device=b2&region=eu"} {
		if code, _, body := s.do("GET", pub+u, ""); code != 204 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
	}
	s.waitMetric(`freqcap_callback_dropped_total{reason="invalid"} 1`, 5*time.Second)
	s.waitMetric(`freqcap_callback_dropped_dimensions_total{dim="region"} 1`, 5*time.Second)
	s.waitMetric(`freqcap_callback_forwarded_total{result="counted"} 2`, 5*time.Second)
	if s.get("freq:{win:device:5:b1}") != 1 || s.get("freq:{win:device:5:b2}") != 1 {
		t.Fatal("the refused notice's batch mates were not counted")
	}
	if _, _, body := s.do("GET", "http://"+s.admin+"/metrics", ""); strings.Contains(body, `reason="counter_rejected"`) {
		t.Errorf("a notice was dropped as refused by the counter:\n%s", body)
	}
}

// Whole requests the counter refuses (a new token, a lower batch limit)
// are a matter of configuration: callback keeps every acknowledged notice
// in the journal, sends it again, halves batches over the limit, and
// counts every one once the counter takes them.
func TestARefusedRequestDropsNothing(t *testing.T) {
	s := newStack(t, redistest.Start(t))
	s.startCounter("COUNTER_AUTH_TOKENS=old-token-0123456789")
	s.callback = s.startCallback("COUNTER_TOKEN=old-token-0123456789", "CALLBACK_BATCH_WAIT=20ms", "CALLBACK_SCHEMA_REFRESH=1h")
	pub := "http://" + s.public
	// A counter with a new token: 401 for every request.
	s.counter.Kill()
	s.startCounter("COUNTER_AUTH_TOKENS=new-token-0123456789")
	send(t, 200, func(i int) string { return fmt.Sprintf("%s/win?cid=r&device=tok&eid=tok-%d", pub, i) }, nil)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, _, body := s.do("GET", "http://"+s.admin+"/metrics", ""); strings.Contains(body, `freqcap_callback_forward_refused_total{status="401"}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no refused request in the metrics after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.get("freq:{win:device:r:tok}"); n != 0 {
		t.Fatalf("%d counted by a counter that refuses callback's token", n)
	}
	// The token accepted again (here: the old one back), and a batch limit
	// under callback's batch size: everything is counted, nothing dropped.
	s.counter.Kill()
	s.startCounter("COUNTER_AUTH_TOKENS=old-token-0123456789,new-token-0123456789", "COUNTER_MAX_BATCH=7")
	s.waitKey("freq:{win:device:r:tok}", 200, 30*time.Second)
	send(t, 2000, func(i int) string { return fmt.Sprintf("%s/win?cid=r&device=size&eid=size-%d", pub, i) }, nil)
	s.waitKey("freq:{win:device:r:size}", 2000, 30*time.Second)
	if _, _, body := s.do("GET", "http://"+s.admin+"/metrics", ""); strings.Contains(body, "freqcap_callback_dropped_total{") {
		t.Errorf("notices were dropped:\n%s", body)
	}
}

// TestCallbackTakesDimensionsFromTheCounter: no dimension list is set on
// callback; a notice is checked against the counter's, including when
// callback starts before the counter has ever answered.
func TestCallbackTakesDimensionsFromTheCounter(t *testing.T) {
	s := newStack(t, redistest.Start(t))
	s.callback = s.startCallback("CALLBACK_SCHEMA_REFRESH=200ms")
	pub := "http://" + s.public
	// The counter has not answered yet: kept as they came, checked later.
	for _, u := range []string{"/win?cid=6&region=eu&price=1", "/win?cid=6&device=d1&region=${REGION}", "/win?cid=6&price=2"} {
		if code, _, body := s.do("GET", pub+u, ""); code != 204 {
			t.Fatalf("GET %s before the schema: %d %s", u, code, body)
		}
	}
	s.startCounter("COUNTER_DIMENSIONS=device,region", "COUNTER_CACHED_DIMENSIONS=region", "COUNTER_EVENTS=win,billing")
	s.waitKey("freq:{win:region:6:eu}", 1, 10*time.Second)
	s.waitMetric(`freqcap_callback_dropped_total{reason="macro"} 1`, 5*time.Second)
	s.waitMetric(`freqcap_callback_dropped_total{reason="invalid"} 1`, 5*time.Second)
	if s.exists("freq:{win:device:6:d1}") {
		t.Error("a notice with an unsubstituted macro was counted")
	}
	// Once known, the schema is checked before a notice is acknowledged.
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 5*time.Second)
	for u, msg := range map[string]string{"/win?cid=6&bundle=com.x": "at least one dimension is required (device, region)", "/imp?cid=6&device=d": "no imp events"} {
		if code, _, body := s.do("GET", pub+u, ""); code != 400 || !strings.Contains(body, msg) {
			t.Errorf("GET %s: %d %s, want 400 %q", u, code, body, msg)
		}
	}
	if code, _, _ := s.do("GET", pub+"/win?cid=6&region=eu", ""); code != 204 {
		t.Errorf("a notice within the schema: %d", code)
	}
	s.waitKey("freq:{win:region:6:eu}", 2, 5*time.Second)
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/6", `{"winLimitHours":169}`); code != 400 || !strings.Contains(body, "between 0 and 168") {
		t.Errorf("a campaign beyond the counter's maxWindowHours: %d %s", code, body)
	}
}

// A retry after the counter forgot the eid would count twice: callback
// refuses CALLBACK_RETRY_FOR longer than half the counter's dedupe window.
func TestRetryForMustFitTheCounterDedupeWindow(t *testing.T) {
	s := newStack(t, redistest.Start(t))
	s.startCounter("COUNTER_DEDUPE_TTL=2m")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bins, "callback"))
	cmd.Env = append(os.Environ(), "CALLBACK_ADDR="+s.public, "CALLBACK_ADMIN_ADDR="+s.admin,
		"COUNTER_URL=http://"+s.counterAddr, "REDIS_URL="+s.redis.URL(), "CALLBACK_RETRY_FOR=5m")
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), "CALLBACK_RETRY_FOR=5m0s: must be at most half the counter's COUNTER_DEDUPE_TTL (120s)") {
		t.Fatalf("callback with CALLBACK_RETRY_FOR=5m against a 2m dedupe window: %v\n%s", err, out)
	}
	s.callback = s.startCallback("CALLBACK_RETRY_FOR=1m")
}

// The admin API reads its own writes: a GET right after a PUT or DELETE
// answers what was written, never a cached older campaign.
func TestAdminReadsItsOwnWrites(t *testing.T) {
	s := startStack(t)
	url := "http://" + s.admin + "/v1/campaigns/own"
	for i := range 200 {
		want := strconv.Itoa(1 + i%24)
		if code, _, body := s.do("PUT", url, `{"winLimitHours":`+want+`}`); code != 204 && code != 200 {
			t.Fatalf("PUT: %d %s", code, body)
		}
		code, _, body := s.do("GET", url, "")
		var got struct{ WinLimitHours int }
		if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || strconv.Itoa(got.WinLimitHours) != want {
			t.Fatalf("try %d: GET after PUT winLimitHours %s: %d %s", i, want, code, body)
		}
		if i%2 == 1 {
			s.do("DELETE", url, "")
			if code, _, body := s.do("GET", url, ""); code != 404 {
				t.Fatalf("try %d: GET after DELETE: %d %s", i, code, body)
			}
		}
	}
}

// A campaign's declared caps decide what its notices are counted in: the
// hour window and the exact window each event's caps need, with no
// winLimitHours kept in step by hand. Bad caps are refused whole, naming
// the field, and change nothing.
func TestDeclaredCapsDecideWhatIsCounted(t *testing.T) {
	s := startStack(t)
	url := "http://" + s.admin + "/v1/campaigns/dc"
	caps := `{"winLimitHours":0,"caps":[
		{"level":"campaign","event":"win","window":{"unit":"day","n":1},"limit":3},
		{"level":"campaign","event":"imp","window":{"unit":"hours","n":5},"limit":10},
		{"level":"campaign","event":"imp","window":{"unit":"minutes","n":10,"minGapSec":60},"limit":2},
		{"level":"campaign","event":"win","window":{"unit":"week","n":1},"limit":10},
		{"level":"campaign","event":"imp","window":{"unit":"month","n":1},"limit":40}]}`
	if code, _, body := s.do("PUT", url, caps); code != 200 || !strings.Contains(body, `"unit":"minutes"`) {
		t.Fatalf("PUT caps: %d %s", code, body)
	}
	if code, _, body := s.do("GET", url, ""); code != 200 || !strings.Contains(body, `"minGapSec":60`) {
		t.Fatalf("GET after PUT: %d %s", code, body)
	}
	pub := "http://" + s.public
	for _, u := range []string{"/win?cid=dc&device=d&eid=dc-1", "/imp?cid=dc&device=d&eid=dc-1"} {
		if code, _, body := s.do("GET", pub+u, ""); code >= 300 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
	}
	s.waitKey("freq:{imp:device:dc:d}", 1, 10*time.Second)
	s.waitKey("freq:{win:device:dc:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	// imp is counted in its hour buckets, its 600 s exact window and its
	// month; win, whose caps are the day and the week, in its week only.
	for key, want := range map[string]bool{"hfreq:{imp:device:dc:d}": true, "sfreq:{imp:device:dc:d}:600": true,
		"freq:{imp:device:dc:d}:month": true, "freq:{imp:device:dc:d}:week": false,
		"hfreq:{win:device:dc:d}": false, "sfreq:{win:device:dc:d}:600": false,
		"freq:{win:device:dc:d}:week": true, "freq:{win:device:dc:d}:month": false} {
		if got := s.exists(key); got != want {
			t.Errorf("%s exists %v, want %v", key, got, want)
		}
	}
	// The admin's view of the device reads the windows the caps need.
	code, _, body := s.do("GET", url+"/counts?device=d", "")
	var counts struct {
		Events map[string]counting.Answer `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &counts); err != nil || code != 200 {
		t.Fatalf("counts: %d %s", code, body)
	}
	imp := counts.Events["imp"].Counts["device"]
	if imp.Day != 1 || imp.Windows["5"] != 1 || imp.Pace == nil || imp.Pace.Count != 1 || imp.Month == nil || *imp.Month != 1 {
		t.Errorf("counts of imp: %+v, want the day, the 5-hour window, the exact window and the month at 1", imp)
	}
	if win := counts.Events["win"].Counts["device"]; win.Week == nil || *win.Week != 1 {
		t.Errorf("counts of win: %+v, want the week at 1", win)
	}
	for body, want := range map[string]string{
		`{"caps":[{"window":{"unit":"hours","n":500},"limit":1}]}`:                                                      "caps[0].window.n must be between 1 and 168",
		`{"caps":[{"level":"advertiser","window":{"unit":"day","n":1},"limit":1}]}`:                                     "caps[0].level",
		`{"caps":[{"window":{"unit":"day","n":1},"limit":1},{"event":"view","window":{"unit":"day","n":1},"limit":1}]}`: "caps[1].event",
		`{"caps":[{"window":{"unit":"fortnight","n":1},"limit":1}]}`:                                                    "caps[0].window.unit",
	} {
		if code, _, got := s.do("PUT", url, body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %s", body, code, got, want)
		}
	}
	if _, _, body := s.do("GET", url, ""); !strings.Contains(body, `"minGapSec":60`) {
		t.Errorf("refused PUTs changed the campaign: %s", body)
	}
}

// The admin API decodes strictly: a body that is not declared JSON, with
// something after the object, a member in another case or given twice is
// a 400 naming it, and the campaign stays as it was. A notice whose id is
// blank-rendering (a Hangul filler) is refused.
func TestAdminRefusesLooseJSON(t *testing.T) {
	s := startStack(t)
	url := "http://" + s.admin + "/v1/campaigns/strict"
	if code, _, body := s.do("PUT", url, `{"winLimitHours":3}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	put := func(contentType, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("PUT", url, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct{ contentType, body, want string }{
		{"text/plain", `{"winLimitHours":5}`, "Content-Type must be application/json"},
		{"application/json", `{"winLimitHours":5}{"winLimitHours":6}`, "after top-level value"},
		{"application/json", `{"WinLimitHours":5}`, `unknown object member name \"WinLimitHours\"`},
		{"application/json", `{"winLimitHours":5,"winLimitHours":6}`, `duplicate object member name \"winLimitHours\"`},
	} {
		if code, body := put(tt.contentType, tt.body); code != 400 || !strings.Contains(body, tt.want) {
			t.Errorf("PUT %s %s: %d %s, want 400 naming %s", tt.contentType, tt.body, code, body, tt.want)
		}
	}
	if code, _, body := s.do("GET", url, ""); code != 200 || !strings.Contains(body, `"winLimitHours":3`) {
		t.Errorf("the campaign after refused PUTs: %d %s, want winLimitHours 3", code, body)
	}
	if code, _, body := s.do("GET", "http://"+s.public+"/win?cid=strict&device=%E3%85%A4&eid=f-1", ""); code != 400 || !strings.Contains(body, "device") {
		t.Errorf("a notice with device U+3164: %d %s, want 400 naming device", code, body)
	}
}

// An operator lists campaigns a page at a time and looks at one device in
// one campaign: its settings and what the counter has for every event.
func TestAdminListsCampaignsAndShowsADevice(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin
	for _, cid := range []string{"c1", "c2", "c3", "c4", "c5"} {
		s.do("PUT", admin+"/v1/campaigns/"+cid, `{"winLimitHours":3,"paceWindowSec":600}`)
	}
	s.do("DELETE", admin+"/v1/campaigns/c2", "")
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		code, _, body := s.do("GET", admin+"/v1/campaigns?limit=2&after="+after, "")
		var page struct {
			Campaigns []struct {
				CID           string `json:"cid"`
				WinLimitHours int    `json:"winLimitHours"`
			} `json:"campaigns"`
			Next string `json:"next"`
		}
		if err := json.Unmarshal([]byte(body), &page); code != 200 || err != nil || len(page.Campaigns) > 2 || pages > 5 {
			t.Fatalf("page after %q: %d %s", after, code, body)
		}
		for _, c := range page.Campaigns {
			got = append(got, c.CID)
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if strings.Join(got, ",") != "c1,c3,c4,c5" {
		t.Errorf("listed %v, want c1,c3,c4,c5", got)
	}
	if code, _, body := s.do("GET", admin+"/v1/campaigns?limit=5000", ""); code != 400 || !strings.Contains(body, "limit must be") {
		t.Errorf("limit=5000: %d %s", code, body)
	}

	if code, _, _ := s.do("GET", "http://"+s.public+"/win?cid=c1&device=op-1&eid=o-1", ""); code != 204 {
		t.Fatalf("notice: %d", code)
	}
	s.waitKey("freq:{win:device:c1:op-1}", 1, 10*time.Second)
	code, _, body := s.do("GET", admin+"/v1/campaigns/c1/counts?device=op-1", "")
	var view struct {
		Campaign struct{ WinLimitHours, PaceWindowSec int }
		Events   map[string]struct {
			WindowHours []int `json:"windowHours"`
			Counts      map[string]struct {
				Day     int64
				Windows map[string]int64
				Pace    struct{ Count int64 }
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &view); code != 200 || err != nil {
		t.Fatalf("counts: %d %s", code, body)
	}
	win, dev := view.Events["win"], view.Events["win"].Counts["device"]
	if view.Campaign.WinLimitHours != 3 || fmt.Sprint(win.WindowHours) != "[3]" || dev.Day != 1 || dev.Windows["3"] != 1 || dev.Pace.Count != 1 {
		t.Errorf("counts of device op-1 in c1: %s", body)
	}
	if _, ok := view.Events["billing"]; !ok {
		t.Errorf("counts lack the billing event: %s", body)
	}
	for url, want := range map[string]int{
		admin + "/v1/campaigns/c1/counts?devise=op-1": 400,
		admin + "/v1/campaigns/c1/counts":             400,
		admin + "/v1/campaigns/c2/counts?device=op-1": 404,
	} {
		if code, _, body := s.do("GET", url, ""); code != want {
			t.Errorf("%s: %d %s, want %d", url, code, body, want)
		}
	}
}

// With signing keys, only notices the bidder signed are counted: forged,
// tampered, expired, unknown-kid and wrong-key notices are refused with
// 403 and count nothing; a signed URL with an exchange's price appended
// after sig counts once; an unknown campaign is refused.
func TestSignedNotices(t *testing.T) {
	k1, k0 := []byte("freqcap-k1-secret-0123"), []byte("freqcap-k0-secret-0123")
	keys := "k1:" + base64.StdEncoding.EncodeToString(k1) + ",k0:" + base64.StdEncoding.EncodeToString(k0)
	s := startStack(t, "CALLBACK_SIGNING_KEYS="+keys)
	s.do("PUT", "http://"+s.admin+"/v1/campaigns/s1", `{"winLimitHours":2}`)
	pub := "http://" + s.public
	signer := client.NoticeSigner{CallbackURL: pub, KeyID: "k1", Secret: k1}
	urls := func(sg client.NoticeSigner, cid, device, req string) client.Notices {
		t.Helper()
		n, err := sg.URLs(cid, client.Identities{"device": device}, req, "1")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	get := func(u string) int {
		t.Helper()
		code, _, _ := s.do("GET", u, "")
		return code
	}

	n := urls(signer, "s1", "sd", "req-1")
	// The exchange appends its macros after sig: never signed, never counted.
	for range 2 {
		if code := get(n.Win + "&price=1.23&cid=other&device=evil"); code != 204 {
			t.Fatalf("signed notice with a price appended: %d", code)
		}
	}
	if code, _, _ := s.do("POST", n.Billing, "cid=other&device=evil"); code != 204 {
		t.Fatalf("signed POST notice: %d", code)
	}
	old := signer
	old.KeyID, old.Secret = "k0", k0
	if code := get(urls(old, "s1", "sd-old", "req-2").Win); code != 204 {
		t.Fatalf("a notice signed with the older key: %d", code)
	}
	s.waitKey("freq:{win:device:s1:sd}", 1, 10*time.Second)
	s.waitKey("freq:{billing:device:s1:sd}", 1, 10*time.Second)
	s.waitKey("freq:{win:device:s1:sd-old}", 1, 10*time.Second)

	expired := signer
	expired.Now = func() time.Time { return time.Now().Add(-25 * time.Hour) }
	farOff := signer
	farOff.TTL = 48 * time.Hour
	unknownKid := signer
	unknownKid.KeyID = "k9"
	wrongKey := signer
	wrongKey.Secret = []byte("not-the-secret-of-k1")
	forged := map[string]string{
		pub + "/win?cid=s1&device=f1&eid=x:1":                                              "missing",
		strings.Replace(urls(signer, "s1", "f2", "r-f2").Win, "device=f2", "device=f3", 1): "bad_sig",
		urls(wrongKey, "s1", "f4", "r-f4").Win:                                             "bad_sig",
		urls(unknownKid, "s1", "f5", "r-f5").Win:                                           "unknown_kid",
		urls(expired, "s1", "f6", "r-f6").Win:                                              "expired",
		urls(farOff, "s1", "f7", "r-f7").Win:                                               "exp_too_far",
	}
	for u, reason := range forged {
		code, _, body := s.do("GET", u, "")
		if code != 403 || !strings.Contains(body, reason) {
			t.Errorf("%s: %d %s, want 403 naming %s", u, code, body, reason)
		}
	}
	if code := get(urls(signer, "nope", "f8", "r-f8").Win); code != 404 {
		t.Errorf("a signed notice of an unknown campaign: %d, want 404", code)
	}
	s.waitMetric(`freqcap_callback_signature_failures_total{reason="bad_sig"} 2`, 5*time.Second)
	s.waitSettled(10 * time.Second) // what a forged notice would have counted, it has
	for _, key := range []string{"freq:{win:device:s1:f1}", "freq:{win:device:s1:f3}", "freq:{win:device:s1:f4}", "freq:{win:device:s1:f5}",
		"freq:{win:device:s1:f6}", "freq:{win:device:s1:f7}", "freq:{win:device:nope:f8}", "freq:{win:device:other:evil}", "freq:{win:device:s1:evil}"} {
		if s.exists(key) {
			t.Errorf("%s was counted", key)
		}
	}
	s.waitKey("freq:{win:device:s1:sd}", 1, 0)
}

// A signed URL counts only for the event it was signed for, and once for
// as long as it is valid: sent again after the counter forgot its event
// id, it is answered as before and counted no more. A signed URL without
// an eid, or with a version 1 signature, is refused.
func TestSignedNoticesCountTheirEventOnce(t *testing.T) {
	k1 := []byte("freqcap-k1-secret-0123")
	s := startStack(t, "CALLBACK_SIGNING_KEYS=k1:"+base64.StdEncoding.EncodeToString(k1), "CALLBACK_UNKNOWN_CAMPAIGNS=count")
	pub := "http://" + s.public
	signer := client.NoticeSigner{CallbackURL: pub, KeyID: "k1", Secret: k1}
	n, err := signer.URLs("r1", client.Identities{"device": "rd"}, "req-1", "1")
	if err != nil {
		t.Fatal(err)
	}
	// The pixel URL, seen by anyone who sees the ad, counts no win or billing.
	for _, event := range []string{"win", "billing"} {
		u := strings.Replace(n.Imp, "/imp?", "/"+event+"?", 1)
		if code, _, body := s.do("GET", u, ""); code != 403 || !strings.Contains(body, "bad_sig") {
			t.Errorf("the pixel URL sent to /%s: %d %s, want 403 bad_sig", event, code, body)
		}
	}
	for round := range 3 {
		if code, _, body := s.do("GET", n.Imp, ""); code != 200 {
			t.Fatalf("the pixel, round %d: %d %s", round, code, body)
		}
		s.waitKey("freq:{imp:device:r1:rd}", 1, 10*time.Second)
		// The counter forgets event ids after COUNTER_DEDUPE_TTL: here at once.
		if err := s.rc.Do(context.Background(), s.rc.B().Del().Key("dedup:{imp:device:r1:rd}").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	s.waitMetric(`freqcap_callback_notices_duplicate_total{event="imp"} 2`, 5*time.Second)
	s.waitKey("freq:{win:device:r1:rd}", 0, 0)

	exp := time.Now().Add(10 * time.Minute)
	noEID := pub + "/win?" + signing.SignQuery("k1", k1, exp, "win", []signing.Param{{Name: "cid", Value: "r1"}, {Name: "device", Value: "ne"}})
	if code, _, body := s.do("GET", noEID, ""); code != 400 || !strings.Contains(body, "eid") {
		t.Errorf("a signed notice without eid: %d %s, want 400 naming eid", code, body)
	}
	c := signing.Canonical([]signing.Param{{Name: "cid", Value: "r1"}, {Name: "device", Value: "v1"}, {Name: "eid", Value: "e:1"},
		{Name: "kid", Value: "k1"}, {Name: "exp", Value: strconv.FormatInt(exp.Unix(), 10)}})
	if code, _, body := s.do("GET", pub+"/win?"+c+"&sig="+signing.Sum(k1, c), ""); code != 403 || !strings.Contains(body, "v1_refused") {
		t.Errorf("a version 1 signature: %d %s, want 403 v1_refused", code, body)
	}
}

// The services authenticate each other: a counter that requires a token
// counts what callback forwards with COUNTER_TOKEN, and the admin API
// takes its own tokens while health and metrics stay open on it.
func TestServicesAuthenticate(t *testing.T) {
	const counterToken, adminToken = "counter-token-0123456789", "admin-token-0123456789"
	s := newStack(t, redistest.Start(t))
	s.startCounter("COUNTER_AUTH_TOKENS=" + counterToken)
	s.callback = s.startCallback("COUNTER_TOKEN="+counterToken, "CALLBACK_ADMIN_TOKENS="+adminToken)
	admin := "http://" + s.admin
	withToken := func(method, url, token, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		method, url, token, body string
		want                     int
	}{
		{"PUT", admin + "/v1/campaigns/au", "", `{"winLimitHours":2}`, 401},
		{"PUT", admin + "/v1/campaigns/au", counterToken, `{"winLimitHours":2}`, 401},
		{"PUT", admin + "/v1/campaigns/au", adminToken, `{"winLimitHours":2}`, 200},
		{"GET", admin + "/v1/campaigns", "", "", 401},
		{"GET", admin + "/v1/campaigns/au", adminToken, "", 200},
		{"GET", admin + "/healthz", "", "", 200},
		{"GET", admin + "/metrics", "", "", 200},
		{"GET", "http://" + s.counterAddr + "/v1/freq?cid=au&device=d", "", "", 401},
	} {
		if code := withToken(tt.method, tt.url, tt.token, tt.body); code != tt.want {
			t.Errorf("%s %s with token %q: %d, want %d", tt.method, tt.url, tt.token, code, tt.want)
		}
	}
	if code, _, _ := s.do("GET", "http://"+s.public+"/win?cid=au&device=d&eid=au-1", ""); code != 204 {
		t.Fatalf("notice: %d", code)
	}
	s.waitKey("freq:{win:device:au:d}", 1, 10*time.Second)
	if !s.exists("hfreq:{win:device:au:d}") {
		t.Error("the campaign's hour window was not counted")
	}
	if code := withToken("GET", admin+"/v1/campaigns/au/counts?device=d", adminToken, ""); code != 200 {
		t.Errorf("counts through the admin API (callback's token to the counter): %d", code)
	}
}

// composeRedisArgs are the redis-server arguments of compose.yaml's redis
// service, with each ${VAR:-default} at its default.
func composeRedisArgs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Command []string `json:"command"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	cmd := c.Services["redis"].Command
	if len(cmd) < 2 || cmd[0] != "redis-server" {
		t.Fatalf("compose's redis command: %q", cmd)
	}
	def := regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)
	args := make([]string, len(cmd)-1)
	for i, a := range cmd[1:] {
		args[i] = def.ReplaceAllString(a, "$1")
	}
	return args
}

// Redis as compose runs it by default (one server with AOF, maxmemory
// with noeviction, no default user, one ACL user): both services work
// through its credentials, the client-side cache included, and the
// counter reports the memory limit.
func TestServicesRunOnComposesRedis(t *testing.T) {
	args := composeRedisArgs(t)
	s := &stack{t: t, redis: redistest.StartSingle(t, args...)}
	// As compose passes it: the user in REDIS_URL, the password apart.
	s.redisURL = "redis://freqcap@" + s.redis.Addr
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.redis.Addr}, Username: "freqcap", Password: "freqcap-dev-password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s.rc = c
	if _, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.redis.Addr}, DisableCache: true}); err == nil {
		t.Error("compose's Redis answered a client without credentials")
	}
	s.counterAddr = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	ops := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	s.counter = proctest.Start(t, filepath.Join(bins, "counter"), "http://"+s.counterAddr+"/healthz",
		"COUNTER_ADDR="+s.counterAddr, "COUNTER_OPS_ADDR="+ops, "REDIS_URL="+s.url(), "REDIS_PASSWORD=freqcap-dev-password", "LOG_FORMAT=json")
	s.public = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	s.admin = "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	s.callback = s.startCallback("REDIS_PASSWORD=freqcap-dev-password")
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/cz", `{"winLimitHours":2}`); code != 200 {
		t.Fatalf("PUT campaign: %d %s", code, body)
	}
	if code, _, _ := s.do("GET", "http://"+s.public+"/win?cid=cz&device=d&bundle=com.cz&eid=cz-1", ""); code != 204 {
		t.Fatalf("notice: %d", code)
	}
	s.waitKey("freq:{win:bundle:cz:com.cz}", 1, 10*time.Second)
	for range 2 { // the bundle is read through client-side caching
		code, _, body := s.do("GET", "http://"+s.counterAddr+"/v1/freq?cid=cz&bundle=com.cz&windowHours=2", "")
		if code != 200 || !strings.Contains(body, `"day":1`) || strings.Contains(body, `"degraded":true`) {
			t.Fatalf("read: %d %s", code, body)
		}
	}
	s.waitMetricAt("http://"+ops+"/metrics", "freqcap_counter_redis_memory_max_bytes 1.073741824e+09", 5*time.Second)
	if out := s.counter.Logs() + s.callback.Logs(); strings.Contains(out, "NOPERM") {
		t.Errorf("a command was refused by the ACL:\n%s", out)
	}
}

// One source cannot push more than CALLBACK_SOURCE_LIMIT: past it, 429
// with Retry-After, and nothing of the refused notices is counted.
func TestPublicPortLimitsEachSource(t *testing.T) {
	s := startStack(t, "CALLBACK_SOURCE_LIMIT=20/1m")
	got := map[int]int{}
	retryAfter := ""
	for i := range 30 {
		code, h, _ := s.do("GET", fmt.Sprintf("http://%s/win?cid=src&device=d&eid=s%d", s.public, i), "")
		got[code]++
		if code == 429 {
			retryAfter = h.Get("Retry-After")
		}
	}
	if got[204] != 20 || got[429] != 10 || retryAfter == "" {
		t.Fatalf("30 notices against 20/1m: %v, Retry-After %q; want 20 accepted, 10 refused with Retry-After", got, retryAfter)
	}
	s.waitKey("freq:{win:device:src:d}", 20, 10*time.Second)
	s.waitMetric(`freqcap_callback_notices_rejected_total{event="win",reason="source_limit"} 10`, 5*time.Second)
}

// TestJournalReplicasGateTheAcknowledgement: with
// CALLBACK_JOURNAL_REPLICAS=1 (and COUNTER_WRITE_REPLICAS=1) a notice is
// answered 204 once a replica has it; with the replica frozen it gets 503,
// and the exchange's resend of it counts once.
func TestJournalReplicasGateTheAcknowledgement(t *testing.T) {
	srv := redistest.Start(t)
	replica := replicaFor(t, srv, journalKey(0))
	s := startStackWith(t, srv, []string{"COUNTER_WRITE_REPLICAS=1"}, []string{"CALLBACK_JOURNAL_REPLICAS=1", "CALLBACK_JOURNAL_PARTITIONS=1", "CALLBACK_APPEND_TIMEOUT=1s"})
	if logs := s.callback.Logs(); !strings.Contains(logs, "journal appends wait for replicas") {
		t.Errorf("callback did not say its appends wait for replicas:\n%s", logs)
	}
	if logs := s.counter.Logs(); !strings.Contains(logs, "writes wait for replicas") {
		t.Errorf("the counter did not say its writes wait for replicas:\n%s", logs)
	}
	pub := "http://" + s.public
	if code, _, body := s.do("GET", pub+"/win?cid=rep&device=dev&eid=r1", ""); code != http.StatusNoContent {
		t.Fatalf("notice with the replica up: %d %s", code, body)
	}
	s.waitKey("freq:{win:device:rep:dev}", 1, 10*time.Second)

	replica.Pause()
	code, h, body := s.do("GET", pub+"/win?cid=rep&device=dev&eid=r2", "")
	replica.Resume()
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || !strings.Contains(body, "not replicated") {
		t.Fatalf("notice with the replica frozen: %d %q %s, want 503 with Retry-After\n%s", code, h.Get("Retry-After"), body, s.callback.Logs())
	}
	s.waitMetric(`freqcap_callback_notices_rejected_total{event="win",reason="journal_unreplicated"} 1`, 5*time.Second)

	// The refused notice reached the master's journal; the exchange sends
	// it again: it is counted once.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, body := s.do("GET", pub+"/win?cid=rep&device=dev&eid=r2", "")
		if code == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resend after the replica came back: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.waitMetric(`freqcap_callback_journal_undelivered 0`, 10*time.Second)
	s.waitKey("freq:{win:device:rep:dev}", 2, 0)
}

// TestTheJournalOnARedisOfItsOwn: with CALLBACK_JOURNAL_REDIS_URL the
// journal lives in that Redis and nothing of it in REDIS_URL's, where the
// campaigns and the counts are; notices are counted as ever, and readiness
// asks both.
func TestTheJournalOnARedisOfItsOwn(t *testing.T) {
	jsrv := redistest.Start(t)
	s := startStackOn(t, redistest.Start(t), "CALLBACK_JOURNAL_REDIS_URL="+jsrv.URL())
	sendAll(t, "http://"+s.public, "own", 200, nil)
	s.waitKey("freq:{win:device:own:dev}", 200, 30*time.Second)

	jrc := newRedisClient(t, jsrv)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		rc   rueidis.Client
		want bool
	}{{"the journal's", jrc, true}, {"REDIS_URL's", s.rc, false}} {
		n, err := c.rc.Do(ctx, c.rc.B().Exists().Key(journalKey(0)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if (n == 1) != c.want {
			t.Errorf("%s Redis holds %s: %v, want %v", c.name, journalKey(0), n == 1, c.want)
		}
	}
	if keys, err := s.rc.Do(ctx, s.rc.B().Keys().Pattern("notices:*").Build()).AsStrSlice(); err != nil || len(keys) > 0 {
		t.Errorf("journal keys in REDIS_URL's Redis: %v %v", keys, err)
	}
	if strings.Contains(s.callback.Logs(), "delivering its notices too") {
		t.Error("a forwarder on REDIS_URL's journal, where there is none")
	}

	if code, _, body := s.do("GET", "http://"+s.admin+"/readyz", ""); code != 200 {
		t.Fatalf("readyz with both up: %d %s", code, body)
	}
	jsrv.Pause()
	defer jsrv.Resume()
	if code, _, body := s.do("GET", "http://"+s.admin+"/readyz", ""); code != 503 || !strings.Contains(body, "journal") {
		t.Errorf("readyz with the journal's Redis frozen: %d %s, want 503 naming the journal", code, body)
	}
}

// TestAJournalMovedToARedisOfItsOwnIsDelivered: notices a callback took
// into REDIS_URL's journal while the counter was away are delivered by a
// callback started with CALLBACK_JOURNAL_REDIS_URL, with the notices it
// takes into its own journal, each counted once.
func TestAJournalMovedToARedisOfItsOwnIsDelivered(t *testing.T) {
	s := newStack(t, redistest.Start(t))
	s.callback = s.startCallback("CALLBACK_DRAIN_TIMEOUT=1s")
	if refused := sendAll(t, "http://"+s.public, "moved", 100, nil); refused > 0 {
		t.Fatalf("%d notices refused", refused)
	}
	s.callback.Signal(syscall.SIGTERM)
	if err := s.callback.Wait(30 * time.Second); err != nil {
		t.Fatalf("callback exit: %v", err)
	}
	s.startCounter()
	jsrv := redistest.Start(t)
	s.callback = s.startCallback("CALLBACK_JOURNAL_REDIS_URL="+jsrv.URL(), "CALLBACK_CLAIM_IDLE=1s")
	if refused := send(t, 50, func(i int) string {
		return fmt.Sprintf("http://%s/win?cid=moved&device=dev&eid=new%d", s.public, i)
	}, nil); refused > 0 {
		t.Fatalf("%d notices refused", refused)
	}
	s.waitKey("freq:{win:device:moved:dev}", 150, 30*time.Second)
	if !strings.Contains(s.callback.Logs(), "delivering its notices too") {
		t.Errorf("no log line of the moved journal's notices:\n%s", s.callback.Logs())
	}

	// Once the old journal is drained (and trimmed) and its last reader
	// without the setting is idle, another callback started with it leaves
	// it alone.
	deadline := time.Now().Add(30 * time.Second)
	for left := int64(-1); left != 0; {
		left = 0
		for p := range 8 {
			n, err := s.rc.Do(context.Background(), s.rc.B().Xlen().Key(journalKey(p)).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			left += n
		}
		if left > 0 && time.Now().After(deadline) {
			t.Fatalf("the old journal holds %d entries after its notices were counted", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	old := newJournal(s.rc, 8, 1000, "test")
	for {
		active, err := old.Active(context.Background(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !active {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old journal's reader without the setting never went idle")
		}
		time.Sleep(50 * time.Millisecond)
	}
	other := *s
	other.public, other.admin = proctest.FreeAddr(t), proctest.FreeAddr(t)
	other.callback = other.startCallback("CALLBACK_JOURNAL_REDIS_URL="+jsrv.URL(), "CALLBACK_CLAIM_IDLE=3s")
	if strings.Contains(other.callback.Logs(), "delivering its notices too") {
		t.Errorf("a second forwarder on the drained old journal:\n%s", other.callback.Logs())
	}
}
