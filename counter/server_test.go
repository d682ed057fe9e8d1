package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/proctest"
	"github.com/freqcap/freqcap/shared/redistest"
)

// startCounter calls run on a free port and waits for /healthz. The server
// is shut down, and run must return nil, when the test ends.
func startCounter(t *testing.T, redisURL string, kv ...string) string {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	ops := "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
	env := append([]string{"COUNTER_ADDR=" + addr, "COUNTER_OPS_ADDR=" + ops, "REDIS_URL=" + redisURL, "LOG_FORMAT=json", "COUNTER_READ_TIMEOUT=2s"}, kv...)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &proctest.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, env, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v", err)
		}
		if t.Failed() {
			t.Logf("counter log:\n%s", logs.String())
		}
	})
	base := "http://" + addr
	waitHealthy(t, base, done)
	opsURLs.Store(base, "http://"+ops)
	return base
}

// opsURLs maps a counter started by startCounter to its ops listener.
var opsURLs sync.Map

// opsURL is the ops listener (metrics, pprof) of the counter at base.
func opsURL(t *testing.T, base string) string {
	t.Helper()
	u, ok := opsURLs.Load(base)
	if !ok {
		t.Fatalf("no ops listener known for %s", base)
	}
	return u.(string)
}

// waitHealthy waits for base to answer /healthz; done (buffered) gets the
// exit error back when the counter ends first, for the test's cleanup.
func waitHealthy(t *testing.T, base string, done chan error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("counter exited before it was healthy: %v", err)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("counter not healthy after 5s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call sends one request and decodes the JSON answer into a generic map.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d %q is not JSON: %v", method, url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// path reads a nested value such as "counts.device.day" out of a decoded answer.
func path(m any, p string) any {
	for _, k := range strings.Split(p, ".") {
		switch v := m.(type) {
		case map[string]any:
			m = v[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i >= len(v) {
				return nil
			}
			m = v[i]
		default:
			return nil
		}
	}
	return m
}

func expect(t *testing.T, m map[string]any, want map[string]any) {
	t.Helper()
	for p, w := range want {
		got := path(m, p)
		if fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("%s = %v, want %v (answer %v)", p, got, w, m)
		}
	}
}

func TestHTTPIncrAndRead(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	rc := newClient(t, srv.URL())

	var m map[string]any
	for range 3 {
		var code int
		code, m = call(t, "POST", base+"/v1/incr?cid=42&device=abc&bundle=com.foo&tagid=7&windowHours=3", "")
		if code != 200 {
			t.Fatalf("incr: %d %v", code, m)
		}
	}
	expect(t, m, map[string]any{
		"cid": "42", "event": "win", "windowHours": "[3]",
		"counts.device.day": 3, "counts.device.windows.3": 3,
		"counts.bundle.day": 3, "counts.tagid.windows.3": 3,
		"degraded": nil,
	})
	if got := rawInt(t, rc, "GET", "freq:{win:device:42:abc}"); got != 3 {
		t.Errorf("raw day key = %d", got)
	}

	code, m := call(t, "GET", base+"/v1/freq?cid=42&device=abc&bundle=com.foo&windowHours=3", "")
	if code != 200 {
		t.Fatalf("freq: %d %v", code, m)
	}
	expect(t, m, map[string]any{"counts.device.day": 3, "counts.bundle.windows.3": 3, "degraded": false, "counts.tagid": nil})

	_, m = call(t, "GET", base+"/v1/freq?cid=42&device=abc", "")
	expect(t, m, map[string]any{"counts.device.day": 3, "counts.device.windows": nil, "windowHours": "[]"})

	_, m = call(t, "POST", base+"/v1/incr?cid=42&device=abc&event=billing&eid=a1", "")
	expect(t, m, map[string]any{"event": "billing", "counts.device.day": 1, "duplicate": nil})
	_, m = call(t, "POST", base+"/v1/incr?cid=42&device=abc&event=billing&eid=a1", "")
	expect(t, m, map[string]any{"event": "billing", "counts.device.day": 1, "duplicate": true})
}

func TestHTTPBatch(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	call(t, "POST", base+"/v1/incr?cid=1&device=d&bundle=b&windowHours=2", "")
	call(t, "POST", base+"/v1/incr?cid=2&device=d&event=imp", "")

	code, m := call(t, "POST", base+"/v1/freq/batch", `{"items":[
		{"cid":"1","event":"win","dims":{"device":"d","bundle":"b"},"windowHours":[2]},
		{"cid":"2","event":"imp","dims":{"device":"d"}},
		{"cid":"3","dims":{"tagid":"none"}}]}`)
	if code != 200 {
		t.Fatalf("batch: %d %v", code, m)
	}
	expect(t, m, map[string]any{
		"code": 0, "msg": "ok",
		"results.0.cid": "1", "results.0.code": 0, "results.0.counts.device.day": 1, "results.0.counts.bundle.windows.2": 1,
		"results.1.cid": "2", "results.1.counts.device.day": 1, "results.1.counts.device.windows": nil,
		"results.2.cid": "3", "results.2.event": "win", "results.2.counts.tagid.day": 0, "results.2.degraded": false,
	})
}

func TestHTTPBadInputChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	// Reads and writes have limits of their own.
	base := startCounter(t, srv.URL(), "COUNTER_MAX_BATCH=3", "COUNTER_MAX_READ_BATCH=2")
	rc := newClient(t, srv.URL())
	tests := []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/v1/incr?device=abc", "", 400, "cid is required"},
		{"POST", "/v1/incr?cid=a:b&device=abc", "", 400, "cid must be"},
		{"POST", "/v1/incr?cid=42", "", 400, "at least one dimension"},
		{"POST", "/v1/incr?cid=42&device=abc&windowHours=169", "", 400, "windowHours must be between 0 and 168"},
		{"POST", "/v1/incr?cid=42&device=abc&windowHours=-1", "", 400, "windowHours must be between 0 and 168"},
		{"POST", "/v1/incr?cid=42&device=abc&windowHours=x", "", 400, "windowHours must be between 0 and 168"},
		{"POST", "/v1/incr?cid=42&device=abc&event=view", "", 400, "event must be one of"},
		{"POST", "/v1/incr?cid=42&device=abc&devise=x", "", 400, `unknown parameter "devise": the parameters are cid, event, eid, windowHours, paceWindowSec, week, month and the dimensions device, bundle, tagid`},
		{"POST", "/v1/incr?cid=42&device=abc&device=def", "", 400, "device must be given once"},
		{"POST", "/v1/incr?cid=42&device=a%20b", "", 400, "device must be 1-128 bytes"},
		{"POST", "/v1/incr?cid=42&device=" + strings.Repeat("x", 129), "", 400, "device must be 1-128 bytes"},
		{"POST", "/v1/incr?cid=42&device=abc&eid=a%0Ab", "", 400, "eid must be"},
		{"GET", "/v1/freq?cid=42&device=abc&eid=e", "", 400, "eid is only accepted on writes"},
		{"POST", "/v1/freq/batch", `{"items":[]}`, 400, "items must hold 1 to 2 items"},
		{"POST", "/v1/freq/batch", `{"items":[{},{},{}]}`, 400, "items must hold 1 to 2 items"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"}},{"cid":"2","dims":{"device":"d"},"windowHours":[500]}]}`, 400, "items[1].windowHours must be between 1 and 168"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"windowHours":3}]}`, 400, "body must be JSON"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"devise":"d"}}]}`, 400, `items[0].dims: unknown dimension "devise"`},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":""}}]}`, 400, "items[0].dims.device must be"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"extra":1}]}`, 400, "body must be JSON"},
		{"POST", "/v1/freq/batch", `not json`, 400, "body must be JSON"},
		// A body beyond 1 KiB an item of COUNTER_MAX_READ_BATCH (2 here) is refused unread.
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"` + strings.Repeat("x", 4000) + `"}}]}`, 400, "body over 2048 bytes"},
		// An oversize id is refused naming its field.
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"` + strings.Repeat("x", 2000) + `"}}]}`, 400, "items[0].dims.device must be 1-128 bytes"},
		// Strict parsing: nothing malformed is dropped silently.
		{"POST", "/v1/incr?cid=42&device=abc&eid=x%zz", "", 400, `malformed query parameter "eid=x%zz"`},
		{"POST", "/v1/incr?cid=42&device=abc&windowHours=3%zz", "", 400, `malformed query parameter "windowHours=3%zz"`},
		{"POST", "/v1/incr?cid=42&device=abc;windowHours=3", "", 400, "malformed query parameter"},
		{"GET", "/v1/views?article=a%zz", "", 400, "malformed query parameter"},
		{"GET", "/v1/limit/gate?policy=p&key=%zz", "", 400, "malformed query parameter"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"}}]}}`, 400, "after top-level value"},
		{"POST", "/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"}}]} [`, 400, "after top-level value"},
		{"POST", "/v1/incr/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"eid":"e"}]}x`, 400, "after top-level value"},
		{"POST", "/v1/incr?cid=42&device=ab%E2%80%8Bc", "", 400, "invisible"},
		{"POST", "/v1/incr?cid=42&device=%EF%BB%BFabc", "", 400, "invisible"},
		// Blank-rendering and default-ignorable code points outside Cf.
		{"POST", "/v1/incr?cid=42&device=%E3%85%A4", "", 400, "device must be"},  // U+3164
		{"POST", "/v1/incr?cid=42&device=a%EF%BE%A0", "", 400, "device must be"}, // U+FFA0
		{"POST", "/v1/incr?cid=42&device=a%E2%A0%80", "", 400, "device must be"}, // U+2800
		{"POST", "/v1/incr?cid=42&device=a%CD%8F", "", 400, "device must be"},    // U+034F
		{"POST", "/v1/incr?cid=42&device=a%EF%B8%8F", "", 400, "device must be"}, // U+FE0F
		// JSON is decoded strictly: exact member names, each once.
		{"POST", "/v1/incr/batch", `{"Items":[{"cid":"1","dims":{"device":"d"}}]}`, 400, `"Items"`},
		{"POST", "/v1/incr/batch", `{"items":[{"CID":"1","dims":{"device":"d"}}]}`, 400, `"CID" within "/items/0"`},
		{"POST", "/v1/incr/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"eid":"a","EID":"b"}]}`, 400, `"EID" within "/items/0"`},
		{"POST", "/v1/incr/batch", `{"items":[{"cid":"1","dims":{"device":"d"},"eid":"a","eid":"b"}]}`, 400, `duplicate object member name "eid"`},
		{"POST", "/v1/incr/batch", `{"items":[{"cid":"1","dims":{"device":"d","device":"e"}}]}`, 400, `duplicate object member name "device"`},
		{"POST", "/v1/limit", `{"key":"` + strings.Repeat("k", 10_000) + `","algorithm":"gcra","limit":1,"period":"1s"}`, 400, "key must be 1-256 bytes"},
		{"POST", "/v1/views", `{"article":"` + strings.Repeat("a", 10_000) + `","viewer":"v"}`, 400, "article must be 1-256 bytes"},
		{"GET", "/v1/views?article=a&articel=b", "", 400, `unknown parameter "articel"`},
		{"GET", "/v1/views?article=a&article=b", "", 400, "article must be given once"},
		{"GET", "/v1/limit/gate?policy=p&key=k&kee=x", "", 400, `unknown parameter "kee"`},
		{"GET", "/v1/limit/gate?policy=p&key=k&key=j", "", 400, "key must be given once"},
		{"GET", "/v1/incr?cid=42&device=abc", "", 405, "not allowed"},
		{"GET", "/v2/nothing", "", 404, "no such route"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			code, m := call(t, tt.method, base+tt.path, tt.body)
			if code != tt.status {
				t.Errorf("status %d, want %d (%v)", code, tt.status, m)
			}
			if msg, _ := m["msg"].(string); !strings.Contains(msg, tt.msg) {
				t.Errorf("msg %q, want it to contain %q", msg, tt.msg)
			}
			if tt.status == 400 && m["code"] != float64(10003) {
				t.Errorf("code %v, want 10003", m["code"])
			}
		})
	}
	if n := rawInt(t, rc, "DBSIZE"); n != 0 {
		t.Errorf("invalid requests wrote %d keys", n)
	}
}

func TestHTTPReadDegradesWriteFails(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_READ_TIMEOUT=20ms")
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	code, m := call(t, "GET", base+"/v1/freq?cid=1&device=d&bundle=b&windowHours=2", "")
	if took := time.Since(start); took > 300*time.Millisecond {
		t.Errorf("degraded read took %s", took)
	}
	if code != 200 {
		t.Fatalf("degraded read status %d", code)
	}
	expect(t, m, map[string]any{"degraded": true, "code": 10001, "counts.device.day": 0, "counts.bundle.windows.2": 0})

	_, m = call(t, "POST", base+"/v1/freq/batch", `{"items":[{"cid":"1","dims":{"device":"d"}}]}`)
	expect(t, m, map[string]any{"code": 0, "results.0.degraded": true, "results.0.code": 10001})

	// A write answers the store's code, as each item of /v1/incr/batch
	// does: Redis is connected and does not answer in time, 10001.
	code, m = call(t, "POST", base+"/v1/incr?cid=1&device=d", "")
	if code != 503 || m["code"] != float64(10001) {
		t.Errorf("write with redis stopped: %d %v, want 503 code 10001", code, m)
	}
	code, _ = call(t, "GET", base+"/readyz", "")
	if code != 503 {
		t.Errorf("readyz with redis stopped: %d, want 503", code)
	}
	srv.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, m = call(t, "GET", base+"/v1/freq?cid=1&device=d", "")
		if m["degraded"] == false {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still degraded 10s after redis came back: %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}

	resp, err := http.Get(opsURL(t, base) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`freqcap_counter_degraded_reads_total{code="10001"}`,
		`freqcap_http_requests_total{code="200",route="/v1/freq",service="counter"}`,
		`freqcap_build_info{commit=`,
		`freqcap_http_request_duration_seconds_bucket{route="/v1/freq",service="counter"`,
		`freqcap_counter_redis_errors_total{op="write"}`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestInvalidConfigNamesVariable(t *testing.T) {
	tests := map[string]string{
		"COUNTER_TIMEZONE=Mars/Base":        "COUNTER_TIMEZONE",
		"COUNTER_READ_TIMEOUT=soon":         "COUNTER_READ_TIMEOUT",
		"COUNTER_READ_TIMEOUT=0s":           "COUNTER_READ_TIMEOUT",
		"COUNTER_MAX_WINDOW_HOURS=0":        "COUNTER_MAX_WINDOW_HOURS",
		"COUNTER_CACHED_DIMENSIONS=country": "COUNTER_CACHED_DIMENSIONS",
		"COUNTER_DIMENSIONS=cid":            "COUNTER_DIMENSIONS",
		"COUNTER_EVENTS=Win":                "COUNTER_EVENTS",
		"LOG_LEVEL=loud":                    "LOG_LEVEL",
		"REDIS_URL=http://x":                "REDIS_URL",
	}
	for kv, name := range tests {
		t.Run(kv, func(t *testing.T) {
			err := run(context.Background(), nil, []string{kv}, io.Discard)
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("run with %s: %v, want an error naming %s", kv, err, name)
			}
		})
	}
}

// TestProcess runs the counter as a real process: a bad setting exits
// non-zero naming the variable; SIGTERM lets an in-flight request finish.
func TestProcess(t *testing.T) {
	bad := exec.Command(os.Args[0], "-test.run=^$")
	bad.Env = append(os.Environ(), "FREQCAP_COUNTER_MAIN=1", "COUNTER_MAX_BATCH=0")
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "COUNTER_MAX_BATCH") {
		t.Errorf("bad config: err %v, output %q; want non-zero exit naming COUNTER_MAX_BATCH", err, out)
	}

	srv := redistest.Start(t)
	addr, ops := "127.0.0.1:"+strconv.Itoa(redistest.FreePort(t)), "127.0.0.1:"+strconv.Itoa(redistest.FreePort(t))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "FREQCAP_COUNTER_MAIN=1", "COUNTER_ADDR="+addr, "COUNTER_OPS_ADDR="+ops, "REDIS_URL="+srv.URL(),
		"COUNTER_READ_TIMEOUT=3s", "LOG_FORMAT=json")
	logs := &proctest.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			_ = cmd.Process.Kill()
			t.Logf("counter log:\n%s", logs.String())
		}
	}()
	waitHealthy(t, "http://"+addr, exited)

	// A read held up by a paused Redis is in flight when SIGTERM arrives.
	srv.Pause()
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/v1/freq?cid=1&device=d")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	waitFor(t, 5*time.Second, func() bool {
		resp, err := http.Get("http://" + ops + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `freqcap_http_requests_in_flight{route="/v1/freq",service="counter"} 1`)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool { return strings.Contains(logs.String(), "counter shutting down") })
	srv.Resume()
	if code := <-answered; code != 200 {
		t.Errorf("in-flight request during SIGTERM: status %d, want 200", code)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("counter did not exit within 10s of SIGTERM")
	}
}

func TestHTTPPaceAndSeveralWindows(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())

	pace := base + "/v1/pace?cid=9&device=d&bundle=b&windowSec=3600&limit=3&minGapSec=600"
	code, m := call(t, "POST", pace+"&eid=e1", "")
	if code != 200 {
		t.Fatalf("pace: %d %v", code, m)
	}
	expect(t, m, map[string]any{"result": "allowed", "resultCode": 1, "dims.device.count": 1, "dims.bundle.result": "allowed"})
	_, m = call(t, "POST", pace+"&eid=e2", "")
	expect(t, m, map[string]any{"result": "too_soon", "resultCode": -1, "dims.device.count": 1})
	_, m = call(t, "POST", pace+"&eid=e1", "")
	expect(t, m, map[string]any{"result": "allowed", "duplicate": true, "dims.device.count": 1})

	for path, want := range map[string]string{
		"/v1/pace?cid=9&device=d&limit=3":                             "windowSec and limit are required",
		"/v1/pace?cid=9&device=d&windowSec=60&limit=0":                "limit must be",
		"/v1/pace?cid=9&device=d&windowSec=60&limit=3&minGapSec=61":   "minGapSec must be",
		"/v1/pace?cid=9&device=d&windowSec=60&limit=3&windowHours=2":  "not windowHours",
		"/v1/incr?cid=9&device=d&windowHours=2,24":                    "one window on writes",
		"/v1/freq?cid=9&device=d&windowHours=1,2,3,4,5,6,7,8,9,10,11": "at most 10 windows",
		"/v1/freq?cid=9&device=d&paceWindowSec=-1":                    "paceWindowSec must be",
	} {
		method := "POST"
		if strings.HasPrefix(path, "/v1/freq") {
			method = "GET"
		}
		code, m := call(t, method, base+path, "")
		if msg, _ := m["msg"].(string); code != 400 || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %v, want 400 naming %q", path, code, m, want)
		}
	}

	// Split mode: writes record in the pace ZSet, reads return it.
	// A write answers the window's state after it, as a read would.
	_, m = call(t, "POST", base+"/v1/incr?cid=7&device=x&windowHours=24&paceWindowSec=600&eid=n1", "")
	expect(t, m, map[string]any{"counts.device.pace.count": 1})
	_, m = call(t, "POST", base+"/v1/incr?cid=7&device=x&windowHours=24&paceWindowSec=600&eid=n2", "")
	expect(t, m, map[string]any{"counts.device.pace.count": 2})
	if last, _ := path(m, "counts.device.pace.lastAt").(float64); time.Since(time.UnixMilli(int64(last))) > time.Minute {
		t.Errorf("incr answered pace.lastAt %v, not this write", last)
	}
	_, m = call(t, "GET", base+"/v1/freq?cid=7&device=x&windowHours=2,24&paceWindowSec=600", "")
	expect(t, m, map[string]any{
		"windowHours": "[2 24]", "counts.device.windows.2": 2, "counts.device.windows.24": 2,
		"counts.device.pace.count": 2, "degraded": false,
	})
	if last, _ := path(m, "counts.device.pace.lastAt").(float64); time.Since(time.UnixMilli(int64(last))) > time.Minute {
		t.Errorf("pace.lastAt %v is not the last write", last)
	}
	_, m = call(t, "POST", base+"/v1/freq/batch", `{"items":[{"cid":"7","dims":{"device":"x"},"windowHours":[24,2],"paceWindowSec":600},{"cid":"7","dims":{"device":"x"},"windowHours":[24]}]}`)
	expect(t, m, map[string]any{
		"results.0.counts.device.windows.2": 2, "results.0.counts.device.pace.count": 2,
		"results.1.counts.device.windows.24": 2, "results.1.windowHours": "[24]",
	})
}

func TestHTTPIncrBatchAnswersPerItem(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	body := `{"items":[
		{"cid":"42","dims":{"device":"d1","bundle":"b1"},"windowHours":[3],"eid":"e1"},
		{"cid":"4:2","dims":{"device":"d1"}},
		{"cid":"43","event":"billing","dims":{"device":"d1"},"eid":"e2"},
		{"cid":"42","dims":{"device":"d1","bundle":"b1"},"windowHours":[3],"eid":"e1"}]}`
	code, m := call(t, "POST", base+"/v1/incr/batch", body)
	if code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	expect(t, m, map[string]any{
		"code": 0, "results.0.code": 0, "results.0.counts.device.day": 1, "results.0.counts.bundle.windows.3": 1,
		"results.1.code": 10003, "results.2.code": 0, "results.2.event": "billing", "results.2.counts.device.day": 1,
		// The same eid again in the batch: counted once.
		"results.3.code": 0, "results.3.duplicate": true, "results.3.counts.device.day": 1,
	})
	if msg, _ := path(m, "results.1.msg").(string); !strings.Contains(msg, "items[1].cid") {
		t.Errorf("invalid item's msg %q does not name items[1].cid", msg)
	}
	_, m = call(t, "GET", base+"/v1/freq?cid=42&device=d1&windowHours=3", "")
	expect(t, m, map[string]any{"counts.device.day": 1, "counts.device.windows.3": 1})
	if code, _ := call(t, "POST", base+"/v1/incr/batch", `{"items":[]}`); code != 400 {
		t.Errorf("an empty batch: %d", code)
	}
	if code, m := call(t, "POST", base+"/v1/freq/batch", `{"items":[{"cid":"42","dims":{"device":"d1"},"eid":"x"}]}`); code != 400 {
		t.Errorf("a read batch with an eid: %d %v", code, m)
	}
}

// A quiet batch (callback's forwarding) answers each item's code and
// duplicate only, and counts exactly as a batch that answers counts.
func TestHTTPQuietIncrBatchCountsTheSame(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL())
	body := `{"quiet":true,"items":[
		{"cid":"42","dims":{"device":"q1","bundle":"b1"},"windowHours":[3],"periods":[{"unit":"day","n":3}],"eid":"e1"},
		{"cid":"4:2","dims":{"device":"q1"}},
		{"cid":"42","dims":{"device":"q1","bundle":"b1"},"windowHours":[3],"periods":[{"unit":"day","n":3}],"eid":"e1"},
		{"cid":"42","dims":{"device":"q1","bundle":"b1"},"windowHours":[3],"periods":[{"unit":"day","n":3}],"eid":"e2"}]}`
	code, m := call(t, "POST", base+"/v1/incr/batch", body)
	if code != 200 {
		t.Fatalf("%d %v", code, m)
	}
	expect(t, m, map[string]any{"results.0.code": 0, "results.1.code": 10003, "results.2.code": 0, "results.2.duplicate": true, "results.3.code": 0})
	for i := range 4 {
		if r, _ := path(m, fmt.Sprintf("results.%d", i)).(map[string]any); r["counts"] != nil || r["cid"] != nil {
			t.Errorf("quiet result %d: %v, want its code and duplicate only", i, r)
		}
	}
	_, m = call(t, "POST", base+"/v1/freq/batch", `{"items":[{"cid":"42","dims":{"device":"q1","bundle":"b1"},"windowHours":[3],"periods":[{"unit":"day","n":3}]}]}`)
	expect(t, m, map[string]any{"results.0.counts.device.day": 2, "results.0.counts.device.windows.3": 2,
		"results.0.counts.device.periods.day:3": 2, "results.0.counts.bundle.windows.3": 2})
	if code, _ := call(t, "POST", base+"/v1/items", `{"items":[{"scope":{"campaign":"42"},"subject":{"dim":"device","id":"q1"},"spec":{"kind":"day"},"hits":0,"quiet":true}]}`); code != 400 {
		t.Errorf("a quiet read: %d, want 400", code)
	}
}

func TestHTTPSchemaIsWhatWritesAreCheckedAgainst(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_DIMENSIONS=device,region", "COUNTER_CACHED_DIMENSIONS=region",
		"COUNTER_EVENTS=win,click", "COUNTER_MAX_WINDOW_HOURS=48")
	code, m := call(t, "GET", base+"/v1/schema", "")
	if code != 200 {
		t.Fatalf("schema: %d %v", code, m)
	}
	expect(t, m, map[string]any{"dimensions": "[device region]", "events": "[win click]", "maxWindowHours": 48,
		"maxPaceWindowSec": 604800, "maxBatch": 1000, "maxReadBatch": 200, "dedupeTtlSec": 600})
	// What it says is what a write meets.
	if code, m := call(t, "POST", base+"/v1/incr?cid=1&region=eu&event=click&windowHours=48", ""); code != 200 {
		t.Errorf("a write within the schema: %d %v", code, m)
	}
	if code, _ := call(t, "POST", base+"/v1/incr?cid=1&region=eu&windowHours=49", ""); code != 400 {
		t.Errorf("windowHours beyond maxWindowHours: %d, want 400", code)
	}
}

// With COUNTER_AUTH_TOKENS the API takes a bearer token (either of two,
// during a rotation); health checks and the ops listener need none.
func TestAPIRequiresABearerToken(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_AUTH_TOKENS=old-token-0123456789, new-token-0123456789")
	do := func(method, url, token, body string) (int, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	read := base + "/v1/freq?cid=1&device=d"
	rpc := base + "/freqcap.v1.FrequencyControl/GetFreq"
	for _, tt := range []struct {
		method, url, token, body string
		want                     int
	}{
		{"GET", read, "", "", 401},
		{"GET", read, "wrong-token-0123456789", "", 401},
		{"GET", read, "old-token-0123456789", "", 200},
		{"GET", read, "new-token-0123456789", "", 200},
		{"POST", base + "/v1/incr?cid=1&device=d", "", "", 401},
		{"POST", rpc, "", `{"business_id":1,"key":"k"}`, 401},
		{"POST", rpc, "new-token-0123456789", `{"business_id":1,"key":"k"}`, 200},
		{"GET", base + "/healthz", "", "", 200},
		{"GET", base + "/readyz", "", "", 200},
		{"GET", base + "/metrics", "new-token-0123456789", "", 404},
		{"GET", base + "/debug/pprof/", "new-token-0123456789", "", 404},
		{"GET", opsURL(t, base) + "/metrics", "", "", 200},
		{"GET", opsURL(t, base) + "/debug/pprof/", "", "", 200},
		{"GET", opsURL(t, base) + "/v1/hotkeys", "", "", 200},
	} {
		code, h := do(tt.method, tt.url, tt.token, tt.body)
		if code != tt.want {
			t.Errorf("%s %s with token %q: %d, want %d", tt.method, tt.url, tt.token, code, tt.want)
		}
		if code == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without WWW-Authenticate", tt.url)
		}
	}
	rc := newClient(t, srv.URL())
	if n := rawInt(t, rc, "DBSIZE"); n != 0 {
		t.Errorf("unauthenticated requests wrote %d keys", n)
	}
}

// Over HTTP a read Redis cannot serve in time answers its last-known counts
// with "stale" and "ageMs", in a single read and in a batch.
func TestHTTPReadAnswersStaleCounts(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_READ_TIMEOUT=30ms")
	call(t, "POST", base+"/v1/incr?cid=st&device=d&windowHours=2&eid=st-1", "")
	read := base + "/v1/freq?cid=st&device=d&windowHours=2"
	batch := `{"items":[{"cid":"st","dims":{"device":"d"},"windowHours":[2]}]}`
	_, m := call(t, "GET", read, "")
	expect(t, m, map[string]any{"counts.device.day": 1, "degraded": false})
	call(t, "POST", base+"/v1/freq/batch", batch)
	srv.Pause()
	defer srv.Resume()
	_, m = call(t, "GET", read, "")
	expect(t, m, map[string]any{"counts.device.day": 1, "counts.device.windows.2": 1, "degraded": false, "stale": true})
	if age, ok := m["ageMs"].(float64); !ok || age < 0 || age > 60_000 {
		t.Errorf("ageMs %v", m["ageMs"])
	}
	_, m = call(t, "POST", base+"/v1/freq/batch", batch)
	expect(t, m, map[string]any{"results.0.counts.device.day": 1, "results.0.stale": true})
}
