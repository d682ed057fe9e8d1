package proctest

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/freqcap/freqcap/shared/redistest"
)

// Stack is a counter and a callback, real processes, over a Redis started
// for the test: what the examples and the client run against.
type Stack struct {
	CounterURL, CallbackURL, AdminURL, RedisURL string
	Counter, Callback                           *Proc
}

// StartStack builds the services and starts Redis,
// the counter (with counterEnv) and callback (with callbackEnv) on free
// loopback ports; everything stops when the test ends.
func StartStack(t testing.TB, counterEnv, callbackEnv []string) *Stack {
	t.Helper()
	bins := t.TempDir()
	if err := Build(bins, "./counter", "./callback"); err != nil {
		t.Fatal(err)
	}
	redis := redistest.Start(t)
	addr, ops, public, admin := FreeAddr(t), FreeAddr(t), FreeAddr(t), FreeAddr(t)
	s := &Stack{CounterURL: "http://" + addr, CallbackURL: "http://" + public, AdminURL: "http://" + admin, RedisURL: redis.URL()}
	s.Counter = Start(t, filepath.Join(bins, "counter"), s.CounterURL+"/healthz", CounterEnv(addr, ops, redis.URL(), counterEnv...)...)
	s.Callback = Start(t, filepath.Join(bins, "callback"), s.AdminURL+"/healthz", CallbackEnv(public, admin, s.CounterURL, redis.URL(), callbackEnv...)...)
	return s
}

// CounterEnv is the environment of a counter listening on addr (its ops
// listener on ops) over the Redis at redisURL, logging JSON, with env
// after it (a later variable wins).
func CounterEnv(addr, ops, redisURL string, env ...string) []string {
	return append([]string{"COUNTER_ADDR=" + addr, "COUNTER_OPS_ADDR=" + ops, "REDIS_URL=" + redisURL, "LOG_FORMAT=json"}, env...)
}

// CallbackEnv is the environment of a callback listening on public and
// admin, sending to the counter at counterURL, over the Redis at
// redisURL, logging JSON, with env after it.
func CallbackEnv(public, admin, counterURL, redisURL string, env ...string) []string {
	return append([]string{"CALLBACK_ADDR=" + public, "CALLBACK_ADMIN_ADDR=" + admin, "COUNTER_URL=" + counterURL,
		"REDIS_URL=" + redisURL, "LOG_FORMAT=json"}, env...)
}

// FreeAddr is a loopback address free at the moment (a port below the
// ephemeral range, reserved across test binaries: redistest.FreePort).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t))
}
