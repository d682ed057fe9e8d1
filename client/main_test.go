package client_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/freqcap/freqcap/shared/proctest"
	"github.com/freqcap/freqcap/shared/redistest"
)

// counterURL and callbackURL are a real counter and callback over a real
// redis-server, started for the package's tests and examples.
var counterURL, counterOpsURL, callbackURL, adminURL, redisURL string

// testRedis is the Redis (or Cluster) behind them.
var testRedis *redistest.Server

// runs numbers fresh's ids.
var runs atomic.Int64

// fresh is id made unique in this process: the package's tests share one
// Redis and one counter, so a test run again (go test -count=N) must not
// find the counts, reservations and limits its earlier run left.
func fresh(id string) string { return id + "-" + strconv.FormatInt(runs.Add(1), 10) }

// testToken is the bearer token the test counter requires: the client's
// calls carry it (Options.Token), as callback's do (COUNTER_TOKEN).
const testToken = "client-test-token-0123456789"

// testPolicies are the counter's named rate-limit policies.
const testPolicies = `
policies:
  - {name: api, algorithm: sliding_log, limit: 3, period: 1m}
  - {name: export, algorithm: fixed_window, limit: 5, period: 1h}
  - name: login
    limits:
      - {algorithm: sliding_log, limit: 5, period: 1m}
      - {algorithm: fixed_window, limit: 20, period: 24h}
  - name: burst
    limits:
      - {algorithm: gcra, limit: 2, period: 1s}
      - {algorithm: fixed_window, limit: 1000, period: 1h}
`

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	bins, err := os.MkdirTemp("", "freqcap-client-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(bins)
	if err := proctest.Build(bins, "./counter", "./callback"); err != nil {
		return 0, err
	}
	redis, err := redistest.Launch()
	if err != nil {
		return 0, err
	}
	defer redis.Close()
	testRedis = redis
	policies := filepath.Join(bins, "limits.yaml")
	if err := os.WriteFile(policies, []byte(testPolicies), 0o600); err != nil {
		return 0, err
	}
	var addrs [4]string
	for i := range addrs {
		port, err := redistest.Port()
		if err != nil {
			return 0, err
		}
		addrs[i] = "127.0.0.1:" + strconv.Itoa(port)
	}
	addr, ops, public, admin := addrs[0], addrs[1], addrs[2], addrs[3]
	counter, err := proctest.Launch(filepath.Join(bins, "counter"), "http://"+addr+"/healthz",
		proctest.CounterEnv(addr, ops, redis.URL(), "COUNTER_AUTH_TOKENS="+testToken, "COUNTER_READ_TIMEOUT=1s", "COUNTER_LIMITS_FILE="+policies)...)
	if err != nil {
		return 0, err
	}
	defer counter.Kill()
	callback, err := proctest.Launch(filepath.Join(bins, "callback"), "http://"+admin+"/healthz",
		proctest.CallbackEnv(public, admin, "http://"+addr, redis.URL(), "COUNTER_TOKEN="+testToken)...)
	if err != nil {
		return 0, err
	}
	defer callback.Kill()
	counterURL, counterOpsURL, callbackURL, adminURL, redisURL = "http://"+addr, "http://"+ops, "http://"+public, "http://"+admin, redis.URL()
	return m.Run(), nil
}
