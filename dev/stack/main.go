// Command stack runs freqcap on a developer's machine: Redis, then the
// services built into bin/, with curl lines to try. It is a development tool
// only; the embedded Redis it may fall back to never ships in a service.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// service is one process of the stack.
type service struct {
	name   string
	env    []string
	health string
}

func run(ctx context.Context, out io.Writer) error {
	redisURL, stopRedis, err := startRedis(ctx, out)
	if err != nil {
		return err
	}
	defer stopRedis()

	services := []service{
		{name: "counter", health: "http://127.0.0.1:8081/healthz", env: []string{"COUNTER_ADDR=127.0.0.1:8081", "REDIS_URL=" + redisURL, "COUNTER_LIMITS_FILE=dev/limits.yaml"}},
		{name: "callback", health: "http://127.0.0.1:9080/healthz", env: []string{
			"CALLBACK_ADDR=127.0.0.1:8080", "CALLBACK_ADMIN_ADDR=127.0.0.1:9080", "COUNTER_URL=http://127.0.0.1:8081",
			"REDIS_URL=" + redisURL, "CALLBACK_CAMPAIGNS_FILE=dev/campaigns.json"}},
	}
	var procs []*exec.Cmd
	defer func() {
		// Last started, first stopped: callback finishes its deliveries to a counter
		// that is still up.
		for _, p := range slices.Backward(procs) {
			_ = p.Process.Signal(syscall.SIGTERM)
			_ = p.Wait()
		}
	}()
	for _, s := range services {
		cmd := exec.Command(filepath.Join("bin", s.name))
		cmd.Env = append(os.Environ(), s.env...)
		cmd.Stdout, cmd.Stderr = out, out
		// A process group of its own: Ctrl-C reaches the stack only, which
		// then stops the services in order.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start %s (run make build first): %w", s.name, err)
		}
		procs = append(procs, cmd)
		if err := waitHealthy(ctx, s.health); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	fmt.Fprint(out, `
freqcap is up: callback on :8080 (admin :9080), counter on :8081; campaigns from dev/campaigns.json
(42: winLimitHours 3, 43: 24, 44: 0). Try:

  # an exchange's win notice (nurl), then the bidder's read
  curl -si 'http://127.0.0.1:8080/win?cid=42&device=abc&bundle=com.foo&tagid=7&eid=auction-1:imp-1&price=0.42'
  curl -s 'http://127.0.0.1:8081/v1/freq?cid=42&device=abc&bundle=com.foo&tagid=7&windowHours=3'
  curl -s -XPOST http://127.0.0.1:8081/v1/freq/batch -d '{"items":[{"cid":"42","dims":{"device":"abc","bundle":"com.foo"},"windowHours":[3]},{"cid":"43","dims":{"device":"abc"},"windowHours":[24]}]}'

  # campaigns, and counting straight on the counter
  curl -s -XPUT http://127.0.0.1:9080/v1/campaigns/45 -d '{"winLimitHours":2}'
  curl -s -XPOST 'http://127.0.0.1:8081/v1/incr?cid=45&device=abc&windowHours=2'
  curl -s http://127.0.0.1:9080/metrics | grep freqcap_callback_

  # the generic frequency-control API (seed 002), Connect JSON
  curl -s -H 'Content-Type: application/json' -d '{"business_id":7,"key":"user:1","time_span":60,"time_unit":"TIME_UNIT_SEC"}' http://127.0.0.1:8081/freqcap.v1.FrequencyControl/AddFreq

  # rate limiting (seed 004): inline, and a named policy of dev/limits.yaml through the gate
  curl -si -XPOST http://127.0.0.1:8081/v1/limit -d '{"key":"user:1","algorithm":"fixed_window","limit":3,"period":"1m","cost":1}'
  curl -si 'http://127.0.0.1:8081/v1/limit/gate?policy=login&key=alice'

Ctrl-C stops everything.
`)
	<-ctx.Done()
	return nil
}

// startRedis uses REDIS_URL when set, else starts redis-server from PATH on
// 127.0.0.1:6379, else falls back to an in-process miniredis.
func startRedis(ctx context.Context, out io.Writer) (string, func(), error) {
	if u := os.Getenv("REDIS_URL"); u != "" {
		fmt.Fprintf(out, "using Redis at REDIS_URL=%s\n", u)
		return u, func() {}, nil
	}
	if bin, err := exec.LookPath("redis-server"); err == nil {
		dir, err := os.MkdirTemp("", "freqcap-redis-")
		if err != nil {
			return "", nil, err
		}
		// Not tied to ctx and in its own process group: Redis stops last,
		// after callback has stopped reading its journal.
		cmd := exec.Command(bin, "--port", "6379", "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("start redis-server: %w", err)
		}
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			_ = os.RemoveAll(dir)
		}
		if err := waitDial(ctx, "127.0.0.1:6379"); err != nil {
			stop()
			return "", nil, fmt.Errorf("redis-server (is port 6379 taken? set REDIS_URL): %w", err)
		}
		fmt.Fprintf(out, "redis-server %s on 127.0.0.1:6379 (data in %s, not persisted)\n", bin, dir)
		return "redis://127.0.0.1:6379", stop, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(out, `
!!! redis-server not found: using an EMBEDDED in-process Redis (miniredis) on %s.
!!! Counts are NOT persistent and client-side caching is OFF.
!!! Install redis-server (Debian: apt-get install redis-server) for the real thing.

`, m.Addr())
	// miniredis has no client tracking and no CLUSTER command.
	return "redis://" + m.Addr() + "?client_cache=0&single=1", m.Close, nil
}

func waitDial(ctx context.Context, addr string) error {
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not listening after 5s", addr)
}

func waitHealthy(ctx context.Context, url string) error {
	for range 100 {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not healthy at %s after 5s", url)
}
