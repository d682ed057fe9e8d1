package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/redistest"
)

const testPolicies = `
policies:
  - name: api
    algorithm: token_bucket
    limit: 100
    period: 1m
    burst: 2
  - name: login
    limits:
      - {algorithm: sliding_log, limit: 2, period: 1m}
      - {algorithm: fixed_window, limit: 10, period: 24h}
  - name: trial
    algorithm: fixed_window
    limit: 1
    period: 1h
    mode: shadow
`

// policyFile writes the policies to a file and returns its path.
func policyFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "limits.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// post sends a JSON body and returns the status, headers and decoded body.
func post(t *testing.T, url, body string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := jsonDecode(resp.Body, &m); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	return resp.StatusCode, resp.Header, m
}

func TestLimitEndpoint(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_LIMITS_FILE="+policyFile(t, testPolicies))

	body := `{"key":"user:1","algorithm":"fixed_window","limit":3,"period":"1m","cost":1}`
	code, h, m := post(t, base+"/v1/limit", body)
	if code != 200 || h.Get("RateLimit-Policy") != `"inline";q=3;w=60` ||
		!strings.HasPrefix(h.Get("RateLimit"), `"inline";r=2;t=`) || h.Get("Retry-After") != "" {
		t.Fatalf("first check: %d %v %v", code, h, m)
	}
	expect(t, m, map[string]any{"allowed": true, "remaining": 2, "retryAfterMs": 0, "delayMs": 0})
	if r := m["resetAfterMs"].(float64); r <= 0 || r > 60_000 {
		t.Errorf("resetAfterMs %v, want within the minute", r)
	}
	post(t, base+"/v1/limit", body)
	post(t, base+"/v1/limit", body)
	code, h, m = post(t, base+"/v1/limit", body)
	if code != 200 || h.Get("Retry-After") == "" || m["allowed"] != false || !strings.HasPrefix(h.Get("RateLimit"), `"inline";r=0;t=`) {
		t.Fatalf("a refused check is a 200 answer with Retry-After: %d %v %v", code, h, m)
	}

	// A named policy of two limits: all or nothing, both in the fields.
	// A peek (cost 0) answers what a hit of 1 would get, consuming
	// nothing: refused with its retry-after once the limit is spent.
	for i, want := range []bool{true, true, false} {
		code, _, m := post(t, base+"/v1/limit", `{"policy":"login","key":"alice","cost":0}`)
		if retry, _ := m["retryAfterMs"].(float64); code != 200 || m["allowed"] != want || (want != (retry == 0)) {
			t.Fatalf("peek %d: %d %v, want allowed %v (a retry-after when refused)", i, code, m, want)
		}
		_, h, m := post(t, base+"/v1/limit", `{"policy":"login","key":"alice"}`)
		if m["allowed"] != want || len(m["limits"].([]any)) != 2 {
			t.Fatalf("login %d: %v, want allowed %v with both limits' answers", i, m, want)
		}
		if p := h.Get("RateLimit-Policy"); p != `"login.0";q=2;w=60, "login.1";q=10;w=86400` {
			t.Errorf("RateLimit-Policy %q", p)
		}
		if i == 2 && !strings.HasPrefix(h.Get("RateLimit"), `"login.0";r=0;t=60, "login.1";r=8;t=`) {
			t.Errorf("RateLimit %q: the refused third login must consume nothing of the daily limit", h.Get("RateLimit"))
		}
	}

	// Shadow mode from the policy: always admitted, reported, counted.
	for i := range 3 {
		_, m := call(t, "POST", base+"/v1/limit", `{"policy":"trial","key":"k"}`)
		expect(t, m, map[string]any{"allowed": true, "shadowed": i > 0})
	}
	mresp, err := http.Get(opsURL(t, base) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{
		`freqcap_counter_limit_checks_total{outcome="shadowed",policy="trial"} 2`,
		`freqcap_counter_limit_checks_total{outcome="refused",policy="login"} 1`,
		`freqcap_counter_limit_checks_total{outcome="allowed",policy="inline"} 3`,
	} {
		if !strings.Contains(string(mb), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestLimitBatchAndGate(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_LIMITS_FILE="+policyFile(t, testPolicies))

	_, m := call(t, "POST", base+"/v1/limit/batch", `{"checks":[
		{"policy":"api","key":"a"},
		{"key":"b","algorithm":"gcra","limit":10,"period":"1s","burst":1},
		{"key":"b","algorithm":"gcra","limit":10,"period":"1s","burst":1}]}`)
	expect(t, m, map[string]any{"code": 0, "results.0.allowed": true, "results.0.remaining": 1,
		"results.1.allowed": true, "results.2.allowed": false, "results.2.retryAfterMs": 100})

	code, m := call(t, "POST", base+"/v1/limit/batch", `{"checks":[{"policy":"api","key":"a"},{"key":"b","algorithm":"gcra","limit":0,"period":"1s"}]}`)
	if code != 400 || m["code"] != float64(10003) || !strings.Contains(m["msg"].(string), "checks[1].limit") {
		t.Fatalf("a batch with an invalid check: %d %v", code, m)
	}
	_, m = call(t, "POST", base+"/v1/limit", `{"policy":"api","key":"a","cost":0}`)
	expect(t, m, map[string]any{"remaining": 1}) // the refused batch consumed nothing

	gate := func(q string) (int, http.Header) {
		resp, err := http.Get(base + "/v1/limit/gate?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	if code, h := gate("policy=api&key=g"); code != 204 || h.Get("RateLimit") != `"api";r=1;t=1` {
		t.Fatalf("gate: %d %v", code, h)
	}
	gate("policy=api&key=g")
	// The bucket held 2; a token bucket (Guava's) lets the third take a
	// permit not yet made, and the fourth waits for it.
	if code, h := gate("policy=api&key=g"); code != 204 || h.Get("RateLimit") != `"api";r=0;t=2` {
		t.Fatalf("gate, third: %d %v", code, h)
	}
	code, h := gate("policy=api&key=g")
	if code != 429 || h.Get("Retry-After") != "1" || h.Get("RateLimit-Policy") != `"api";q=100;w=60` {
		t.Fatalf("gate past the burst: %d %v", code, h)
	}
	if code, h := gate("policy=api&key=g&deny=403"); code != 403 || h.Get("Retry-After") != "1" {
		t.Fatalf("gate with deny=403: %d %v", code, h)
	}
	if code, _ := gate("policy=api&key=g&deny=500"); code != 400 {
		t.Errorf("gate with deny=500: %d", code)
	}
	if code, _ := gate("policy=nope&key=g"); code != 400 {
		t.Errorf("gate of an unknown policy: %d", code)
	}
}

func TestLimitBadInputChangesNothing(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_LIMITS_FILE="+policyFile(t, testPolicies))
	cases := map[string]string{
		`{"key":"k","algorithm":"leaky","limit":1,"period":"1s"}`:                                                                 "algorithm",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1x"}`:                                                                  "period",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1500us"}`:                                                              "period",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"721h"}`:                                                                "period",
		`{"key":"k","algorithm":"gcra","limit":0,"period":"1s"}`:                                                                  "limit",
		`{"key":"k","algorithm":"fixed_window","limit":1,"period":"1s","burst":2}`:                                                "burst",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1s","capacity":2}`:                                                     "capacity",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1s","acquire":true}`:                                                   "acquire",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1s","cost":-1}`:                                                        "cost",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1s","mode":"loud"}`:                                                    "mode",
		`{"key":"","algorithm":"gcra","limit":1,"period":"1s"}`:                                                                   "key",
		`{"key":"k","policy":"api","algorithm":"gcra","limit":1,"period":"1s"}`:                                                   "policy",
		`{"key":"k","policy":"nope"}`:                                                                                             "policy",
		`{"key":"k","algorithm":"gcra","limit":1,"period":"1s","color":"red"}`:                                                    "color",
		`{"key":"k","limits":[{"algorithm":"gcra","limit":1,"period":"1s"},{"algorithm":"gcra","limit":1,"period":"1s"}]}`:        "limits[1]",
		`{"key":"k","limits":[{"algorithm":"gcra","limit":1,"period":"1s"},{"algorithm":"sliding_log","limit":0,"period":"1s"}]}`: "limits[1].limit",
	}
	for body, field := range cases {
		code, m := call(t, "POST", base+"/v1/limit", body)
		if code != 400 || m["code"] != float64(10003) || !strings.Contains(m["msg"].(string), field) {
			t.Errorf("%s: %d %v, want 400 naming %s", body, code, m, field)
		}
	}
	if n := rawInt(t, newClient(t, srv.URL()), "DBSIZE"); n != 0 {
		t.Fatalf("bad checks wrote %d keys", n)
	}
}

func TestLimitFailsOpen(t *testing.T) {
	srv := redistest.Start(t)
	base := startCounter(t, srv.URL(), "COUNTER_READ_TIMEOUT=160ms")
	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	code, m := call(t, "POST", base+"/v1/limit", `{"key":"k","algorithm":"sliding_log","limit":1,"period":"1s"}`)
	// The deadline is kept: not passed, and not cut short (checks share
	// their timers).
	if took := time.Since(start); took > 600*time.Millisecond || took < 160*time.Millisecond {
		t.Errorf("a check with Redis stopped took %s, want its 160 ms deadline", took)
	}
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	expect(t, m, map[string]any{"allowed": true, "degraded": true, "code": 10001})
}

func TestBadPolicyFileStopsTheCounter(t *testing.T) {
	for body, want := range map[string]string{
		"policies: [{name: a, algorithm: gcra, limit: 0, period: 1s}]":                                                   "policies[0].limit",
		"policies: [{name: a, algorithm: gcra, limit: 1, period: 1s}, {name: a, algorithm: gcra, limit: 2, period: 1s}]": "twice",
		"policies: [{name: inline, algorithm: gcra, limit: 1, period: 1s}]":                                              "name",
		"policies: [{name: a, algorithm: gcra, limit: 1, period: 1s, colour: red}]":                                      "colour",
	} {
		_, err := loadSettings([]string{"COUNTER_LIMITS_FILE=" + policyFile(t, body)})
		if err == nil || !strings.Contains(err.Error(), "COUNTER_LIMITS_FILE") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", body, err, want)
		}
	}
}

// FuzzLimitAnswerJSON checks the hand-written encoder of /v1/limit's
// answer against encoding/json: the same value back, and the same bytes
// when the message holds nothing encoding/json escapes.
func FuzzLimitAnswerJSON(f *testing.F) {
	f.Add(true, int64(3), int64(0), int64(1200), int64(0), false, false, 0, "", uint8(0))
	f.Add(false, int64(0), int64(-1), int64(60_000), int64(5), true, true, 10003, "redis unavailable, retry: \"x\" <é>\n", uint8(3))
	f.Fuzz(func(t *testing.T, allowed bool, remaining, retry, reset, delay int64, shadowed, degraded bool, code int, msg string, n uint8) {
		a := counting.LimitAnswer{Allowed: allowed, Remaining: remaining, RetryAfterMs: retry, ResetAfterMs: reset, DelayMs: delay,
			Shadowed: shadowed, Degraded: degraded, Code: code, Msg: msg}
		for i := range int(n % 4) {
			a.Limits = append(a.Limits, counting.Decision{Allowed: i%2 == 0, Remaining: remaining + int64(i), RetryAfterMs: retry - int64(i), ResetAfterMs: reset, DelayMs: delay * int64(i)})
		}
		got := appendLimitAnswer(nil, &a)
		want, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back, wantBack counting.LimitAnswer
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		_ = json.Unmarshal(want, &wantBack)
		if !reflect.DeepEqual(back, wantBack) {
			t.Fatalf("decoded %+v, encoding/json's decodes to %+v", back, wantBack)
		}
		if plain := !strings.ContainsFunc(msg, func(r rune) bool { return r < 0x20 || r >= 0x7f || strings.ContainsRune(`"\<>&`, r) }); plain && string(got) != string(want) {
			t.Fatalf("wrote %s, encoding/json writes %s", got, want)
		}
	})
}
