package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/redistest"
)

// TestMain lets a test start this test binary as the real counter process:
// with FREQCAP_COUNTER_MAIN=1 it runs main and nothing else.
func TestMain(m *testing.M) {
	if os.Getenv("FREQCAP_COUNTER_MAIN") == "1" {
		os.Args = os.Args[:1] // the test flags are not the counter's
		main()
		return
	}
	os.Exit(m.Run())
}

// clock is a settable time source for the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testSettings are the defaults with the given variables set on top.
func testSettings(t testing.TB, redisURL string, kv ...string) Settings {
	t.Helper()
	// Reads get a generous deadline unless a test asks otherwise: the race
	// detector on a loaded machine is slow, and only degradation tests want
	// the deadline to bite.
	env := append([]string{"REDIS_URL=" + redisURL, "COUNTER_READ_TIMEOUT=2s"}, kv...)
	s, err := loadSettings(env)
	if err != nil {
		t.Fatalf("settings: %v", err)
	}
	return s
}

func newClient(t testing.TB, url string) rueidis.Client {
	t.Helper()
	c, err := redisconn.Open(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// testStore is a store on srv with its own client, registry and clock,
// with the campaign views on it (the core is st.Store).
func testStore(t testing.TB, srv *redistest.Server, clk *clock, kv ...string) (campaignStore, Settings) {
	t.Helper()
	s := testSettings(t, srv.URL(), kv...)
	st := newTestStore(t, srv.URL(), s, clk.Now)
	t.Cleanup(st.Close)
	return st, s
}

// newTestStore is a store on its own client to url, opened as the counter
// opens it, and its own registry.
func newTestStore(t testing.TB, url string, s Settings, now func() time.Time) campaignStore {
	t.Helper()
	hooks := newRedisHooks(s)
	s.RedisURL = url
	c, err := openRedis(s, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	m := newMetrics(prometheus.NewRegistry())
	return campaignStore{campaign.Counters{Store: core.NewStore(c, s.storeOptions(hooks, now), m), M: m}, m, hooks.cache}
}

// raw runs one command on a separate connection, as redis-cli would.
func raw(t testing.TB, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	return c.Do(context.Background(), c.B().Arbitrary(args...).Build())
}

func rawInt(t testing.TB, c rueidis.Client, args ...string) int64 {
	t.Helper()
	n, err := raw(t, c, args...).AsInt64()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return n
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testutilCount(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// The campaign counters' types, as the tests of this package name them.
type (
	Query      = campaign.Query
	Dim        = campaign.Dim
	Result     = campaign.Result
	PaceRule   = campaign.PaceRule
	PaceResult = campaign.PaceResult
)

// campaignStore is the campaign counters on a test store, with the counter's
// metrics they report to.
type campaignStore struct {
	campaign.Counters
	m     *metrics
	cache *core.LocalCache
}

func newParser(s Settings) *campaign.Parser { return campaign.NewParser(s.limits()) }
