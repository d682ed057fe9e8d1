package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

func newClient(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second
	}
	opts.Token = testToken
	c, err := client.New(counterURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPaceCapsDecide(t *testing.T) {
	// Two notices recorded in the pace window (split mode), 0 and a few ms ago.
	count("cid=p1&device=pace-dev&paceWindowSec=3600&eid=p1:1")
	count("cid=p1&device=pace-dev&paceWindowSec=3600&eid=p1:2")
	c := newClient(t, client.Options{})
	ids := client.Identities{"device": "pace-dev"}
	got, err := c.Decide(context.Background(), ids, []client.Candidate{
		{CID: "p1", Caps: []client.Cap{{Dim: "device", Pace: &client.Pace{Window: time.Hour, Limit: 2}}}},
		{CID: "p1", Caps: []client.Cap{{Dim: "device", Pace: &client.Pace{Window: time.Hour, Limit: 5, MinGap: 10 * time.Minute}}}},
		{CID: "p1", Caps: []client.Cap{{Dim: "device", Pace: &client.Pace{Window: time.Hour, Limit: 5}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Reason{client.PaceLimit, client.PaceGap, ""}
	for i, d := range got {
		if d.Reason != want[i] || d.Allowed != (want[i] == "") || d.Degraded {
			t.Errorf("candidate %d: %v, want reason %q", i, d, want[i])
		}
	}
	if got[0].Count != 2 || got[0].Limit != 2 {
		t.Errorf("pace_limit counts: %+v", got[0])
	}
}

func TestDecideIsOneRoundTrip(t *testing.T) {
	before := batchRequests(t)
	c := newClient(t, client.Options{})
	cands := make([]client.Candidate, 50)
	for i := range cands {
		cands[i] = client.Candidate{CID: "rt" + strconv.Itoa(i), Caps: []client.Cap{
			{Dim: "device", Day: 5, Windows: []client.Window{{Hours: 2, Limit: 3}}},
			{Dim: "bundle", Day: 100},
		}}
	}
	got, err := c.Decide(context.Background(), client.Identities{"device": "d", "bundle": "b"}, cands)
	if err != nil || len(got) != 50 {
		t.Fatalf("decide: %d decisions, %v", len(got), err)
	}
	if n := batchRequests(t) - before; n != 1 {
		t.Errorf("50 candidates cost %d batch requests, want 1", n)
	}
}

// batchRequests reads the counter's own count of batch requests.
func batchRequests(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(counterOpsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`freqcap_http_requests_total\{code="200",route="/v1/freq/batch",service="counter"\} (\d+)`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestDeadlineFailsOpenOrClosed(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	cands := []client.Candidate{{CID: "1", Caps: []client.Cap{{Dim: "device", Day: 1}}}}
	ids := client.Identities{"device": "d"}
	for _, failClosed := range []bool{false, true} {
		c, err := client.New(slow.URL, client.Options{FailClosed: failClosed})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := c.Decide(context.Background(), ids, cands)
		if took := time.Since(start); took > 200*time.Millisecond {
			t.Errorf("fail-closed=%v: took %s with the default 10 ms deadline", failClosed, took)
		}
		if err == nil || !got[0].Degraded || got[0].Allowed == failClosed {
			t.Errorf("fail-closed=%v: %v, err %v", failClosed, got[0], err)
		}
	}
}

func TestRateLimitShedsCalls(t *testing.T) {
	c := newClient(t, client.Options{RateLimit: 1, Burst: 1})
	cands := []client.Candidate{{CID: "rl", Caps: []client.Cap{{Dim: "device", Day: 1}}}}
	ids := client.Identities{"device": "d"}
	if _, err := c.Decide(context.Background(), ids, cands); err != nil {
		t.Fatalf("first call: %v", err)
	}
	got, err := c.Decide(context.Background(), ids, cands)
	if !errors.Is(err, client.ErrRateLimited) || !got[0].Allowed || !got[0].Degraded {
		t.Errorf("second call within a second: %v, err %v; want allowed, degraded, rate limited", got[0], err)
	}
}

func TestNoticeURLsAreCountedByCallback(t *testing.T) {
	n := client.NoticeURLs(callbackURL, "nu", client.Identities{"device": "nu-dev", "tagid": "slot/1&x"})
	// The exchange substitutes the macros.
	win := strings.NewReplacer("${AUCTION_ID}", "auc-9", "${AUCTION_IMP_ID}", "1").Replace(n.Win)
	for range 2 {
		resp, err := http.Get(win)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("win notice: %d", resp.StatusCode)
		}
	}
	c := newClient(t, client.Options{})
	cands := []client.Candidate{{CID: "nu", Caps: []client.Cap{{Dim: "device", Day: 1}, {Dim: "tagid", Day: 1}}}}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := c.Decide(context.Background(), client.Identities{"device": "nu-dev", "tagid": "slot/1&x"}, cands)
		if err == nil && got[0].Reason == client.DayCap && got[0].Count == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notice not counted once: %v %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// An exchange that did not substitute the macros is refused.
	resp, err := http.Get(n.Billing)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unsubstituted notice: %d, want 400", resp.StatusCode)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "counter:8081", "ftp://x"} {
		if _, err := client.New(u, client.Options{}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

// A client without the counter's token is refused, and fails open as for
// any other error the counter answers.
func TestClientWithoutTheTokenIsRefused(t *testing.T) {
	c, err := client.New(counterURL, client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decide(context.Background(), client.Identities{"device": "d"}, []client.Candidate{{CID: "tk", Caps: []client.Cap{{Dim: "device", Day: 1}}}})
	if err == nil || !strings.Contains(err.Error(), "401") || !got[0].Allowed || !got[0].Degraded {
		t.Errorf("without a token: %v, %v; want a 401 error, allowed and degraded", got, err)
	}
}

// A counter that answers last-known counts (Redis too slow) decides on them:
// the decision is real, marked Stale with the counts' age.
func TestStaleCountsDecideAndSaySo(t *testing.T) {
	counter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"code":0,"results":[{"code":0,"cid":"st","event":"win","windowHours":[],"counts":{"device":{"day":5}},"stale":true,"ageMs":1200}]}`)
	}))
	defer counter.Close()
	c, err := client.New(counter.URL, client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Decide(context.Background(), client.Identities{"device": "d"}, []client.Candidate{{CID: "st", Caps: []client.Cap{{Dim: "device", Day: 3}}}})
	if err != nil || got[0].Allowed || got[0].Reason != client.DayCap || got[0].Degraded || !got[0].Stale || got[0].StaleMs != 1200 {
		t.Errorf("stale counts: %+v, %v; want blocked by the day cap, stale 1200 ms, not degraded", got[0], err)
	}
}

// A long candidate list is read in requests of at most MaxBatch counts,
// sent at once, and decided as one call.
func TestDecideSplitsLargeCandidateLists(t *testing.T) {
	for i := range 2 {
		count(fmt.Sprintf("cid=split-149&device=split-dev&eid=split-%d", i))
	}
	c := newClient(t, client.Options{MaxBatch: 100})
	cands := make([]client.Candidate, 150)
	for i := range cands {
		cands[i] = client.Candidate{CID: "split-" + strconv.Itoa(i), Caps: []client.Cap{{Dim: "device", Day: 2}, {Dim: "bundle", Day: 100}}}
	}
	before := batchRequests(t)
	got, err := c.Decide(context.Background(), client.Identities{"device": "split-dev", "bundle": "b"}, cands)
	if err != nil {
		t.Fatal(err)
	}
	if n := batchRequests(t) - before; n != 3 {
		t.Errorf("300 counts with MaxBatch 100 cost %d batch requests, want 3", n)
	}
	for i, d := range got {
		if d.CID != cands[i].CID || d.Allowed != (i != 149) || d.Degraded {
			t.Errorf("candidate %d: %v", i, d)
		}
	}
}

// postCounter posts body, JSON, to the counter's path with the test
// token and answers the body of its 200 answer.
func postCounter(t *testing.T, path string, body []byte) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, counterURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s %v", path, resp.StatusCode, answer, err)
	}
	return answer
}

// The counter's own answer to a Decide's batch read is read in its plain
// form (no full decoding), whatever the caps ask: windows, an exact
// window, a degraded read's answer.
func TestDecideReadsTheCountersAnswerInPlace(t *testing.T) {
	ids := client.Identities{"device": "plain-dev", "bundle": "com.plain"}
	cands := []client.Candidate{
		{CID: "plain1", Caps: []client.Cap{{Dim: "device", Day: 3, Windows: []client.Window{{Hours: 24, Limit: 2}, {Hours: 3, Limit: 1}}}, {Dim: "bundle", Day: 9}}},
		{CID: "plain2", Event: "imp", Caps: []client.Cap{{Dim: "device", Pace: &client.Pace{Window: time.Hour, Limit: 1, MinGap: time.Minute}}}},
	}
	countBatch(t, []counting.BatchItem{{CID: "plain1", Dims: map[string]string{"device": "plain-dev", "bundle": "com.plain"}, WindowHours: []int{24}, EID: "plain-1"}})
	body := postCounter(t, "/v1/freq/batch", client.DecideBody(ids, cands))
	if !client.ReadsPlainAnswer(body, ids, cands) {
		t.Errorf("the counter's answer is not read in its plain form: %s", body)
	}
}
