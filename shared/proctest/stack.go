package proctest

import (
	"net"
	"path/filepath"
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
	addr, ops, public, admin := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	s := &Stack{CounterURL: "http://" + addr, CallbackURL: "http://" + public, AdminURL: "http://" + admin, RedisURL: redis.URL()}
	s.Counter = Start(t, filepath.Join(bins, "counter"), s.CounterURL+"/healthz",
		append([]string{"COUNTER_ADDR=" + addr, "COUNTER_OPS_ADDR=" + ops, "REDIS_URL=" + redis.URL(), "LOG_FORMAT=json"}, counterEnv...)...)
	s.Callback = Start(t, filepath.Join(bins, "callback"), s.AdminURL+"/healthz",
		append([]string{"CALLBACK_ADDR=" + public, "CALLBACK_ADMIN_ADDR=" + admin, "COUNTER_URL=" + s.CounterURL, "REDIS_URL=" + redis.URL(), "LOG_FORMAT=json"}, callbackEnv...)...)
	return s
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
