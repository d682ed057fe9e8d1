// Command counter owns freqcap's Redis keys: it counts events (natural-day
// counters, hour buckets) and serves the bidder's reads with a hard deadline,
// failing open when Redis is slow or down.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/freqcap/freqcap/core"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/buildinfo"
	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/httpserver"
	"github.com/freqcap/freqcap/shared/logging"
	"github.com/freqcap/freqcap/shared/redisconn"
)

func main() {
	if os.Getenv("GOGC") == "" {
		// The heap is small and short-lived per request: collecting less
		// often buys throughput for a few MB. GOGC still overrides.
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// GOGC 400 lets the heap grow to five times what is live: under
		// many large batches at once that was gigabytes. Near this soft
		// limit the GC collects as often as it must instead. GOMEMLIMIT
		// still overrides.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "counter:", err)
		os.Exit(1)
	}
}

// defaultMemoryLimit is the counter's soft memory limit unless GOMEMLIMIT
// says otherwise.
const defaultMemoryLimit = 256 << 20

func run(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	usage := func(w io.Writer) {
		config.Usage[Config](w, "counter", "counts events in Redis and serves the bidder's reads with a hard deadline (freqcap)")
	}
	if done, err := config.Args(args, stdout, usage, buildinfo.Version("counter")); done || err != nil {
		return err
	}
	s, err := loadSettings(environ)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, s.Log)
	if err != nil {
		return err
	}
	hooks := newRedisHooks(s)
	rdb, err := openRedis(s, hooks)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	store := core.NewStore(rdb, s.storeOptions(hooks, time.Now), m)
	defer store.Close()
	registerProcess(reg, rdb, store, hooks.cache)
	if s.WriteReplicas > 0 {
		redisconn.ReportReplicas(ctx, log, rdb, s.WriteReplicas, "COUNTER_WRITE_REPLICAS", "writes", "its writes answer 10001")
	}

	srv, err := httpserver.ListenWith(s.Addr, "COUNTER_ADDR", NewServer(log, s, store, m, reg), httpserver.API)
	if err != nil {
		return err
	}
	ops, err := httpserver.Listen(s.OpsAddr, "COUNTER_OPS_ADDR", NewOpsServer(log, s, store, reg))
	if err != nil {
		_ = srv.Shutdown(time.Second)
		return err
	}
	log.Info("counter listening", "addr", srv.Addr(), "ops", ops.Addr(), "timezone", s.Location.String(),
		"authenticated", len(s.Tokens) > 0, "commit", buildinfo.Read().Commit)
	if len(s.Tokens) == 0 {
		log.Warn("COUNTER_AUTH_TOKENS is not set: the counter's API takes requests from anyone who can reach it")
	}
	select {
	case err := <-srv.Err():
		return err
	case err := <-ops.Err():
		return err
	case <-ctx.Done():
	}
	log.Info("counter shutting down: finishing in-flight requests")
	_ = ops.Shutdown(time.Second)
	if err := srv.Shutdown(s.ShutdownTimeout); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("counter stopped")
	return nil
}

// redisHooks are what the counter installs on its Redis client's options
// and its store then reads: whether Redis is reachable, and the
// client-side cache.
type redisHooks struct {
	reach *redisconn.Reach
	cache *core.LocalCache
}

func newRedisHooks(s Settings) redisHooks {
	return redisHooks{reach: &redisconn.Reach{}, cache: core.NewLocalCache(s.CacheMB << 20)}
}

// openRedis opens the counter's Redis client as its settings say.
func openRedis(s Settings, hooks redisHooks) (rueidis.Client, error) {
	rdb, err := redisconn.Open(s.RedisURL, func(opt *rueidis.ClientOption) {
		hooks.reach.Install(opt)
		hooks.cache.Install(opt)
		if s.RedisPassword != "" {
			opt.Password = s.RedisPassword
		}
		// Commands of concurrent requests that arrive within the delay
		// share one write to Redis: fewer syscalls on both sides, for
		// microseconds of latency.
		opt.MaxFlushDelay = s.FlushDelay
		if s.ReadFrom == "replica" {
			opt.SendToReplicas = redisconn.ReadOnly
		}
	})
	if err != nil {
		return nil, err
	}
	if s.ReadFrom == "replica" && rdb.Mode() != rueidis.ClientModeCluster {
		rdb.Close()
		return nil, fmt.Errorf("COUNTER_READ_FROM=replica: the Redis at REDIS_URL is not a cluster (replica reads need Redis Cluster with replicas)")
	}
	return rdb, nil
}

// registerProcess registers what the counter's process reports besides
// its own metrics: the build, Go and process collectors, Redis's memory,
// the hot keys of the store and the flushes of its client-side cache.
func registerProcess(reg *prometheus.Registry, rdb rueidis.Client, store *core.Store, cache *core.LocalCache) {
	buildinfo.Register(reg, "counter")
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(&redisMemory{rdb: rdb}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "freqcap_counter_hot_keys", Help: "Counters read often enough to go through client-side caching now (COUNTER_HOT_KEY_RATE).",
	}, func() float64 { return float64(store.Hot()) }), prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "freqcap_counter_cache_flushes_total", Help: "Times a Redis connection that had filled the client-side cache broke: the counts it had put there left the cache and are read from Redis again.",
	}, func() float64 { return float64(cache.Flushes()) }))
}
