// Command callback faces ad exchanges: it takes win, billing and impression
// notices, answers at once, and forwards one counting request per notice to
// the counter off the exchange's path, retried until it is counted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/httpserver"
	"github.com/freqcap/freqcap/shared/logging"
	"github.com/freqcap/freqcap/shared/redisconn"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "callback:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, _ []string, environ []string, stdout io.Writer) error {
	s, err := loadSettings(environ)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, s.Log)
	if err != nil {
		return err
	}
	rdb, err := redisconn.Open(s.RedisURL, nil)
	if err != nil {
		return err
	}
	defer rdb.Close()

	campaigns := &Campaigns{rdb: rdb, ttl: s.CampaignTTL, maxWindow: s.MaxWindowHours, maxPace: s.MaxPaceWindow}
	if s.CampaignsFile != "" {
		n, err := campaigns.LoadFile(ctx, s.CampaignsFile)
		if err != nil {
			return err
		}
		log.Info("campaigns loaded", "file", s.CampaignsFile, "count", n)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fwd := newForwarder(s, campaigns, log)
	fwd.metrics = newMetrics(reg, func() float64 { return float64(fwd.Depth()) })
	fwd.Start()

	d := deps{log: log, settings: s, campaigns: campaigns, forwarder: fwd, metrics: fwd.metrics, draining: &atomic.Bool{}, registry: reg,
		httpMetrics: httpmetrics.New(reg, "callback")}
	public, err := httpserver.ListenWith(s.Addr, "CALLBACK_ADDR", NewServer(d), httpserver.Public)
	if err != nil {
		return err
	}
	admin, err := httpserver.Listen(s.AdminAddr, "CALLBACK_ADMIN_ADDR", NewAdminServer(d))
	if err != nil {
		public.Close()
		return err
	}
	log.Info("callback listening", "addr", public.Addr(), "admin", admin.Addr(), "counter", s.CounterURL)

	select {
	case err = <-public.Err():
	case err = <-admin.Err():
	case <-ctx.Done():
	}
	if err != nil {
		return err
	}

	log.Info("callback draining: refusing new notices, delivering the queue", "queued", fwd.Depth(), "timeout", s.DrainTimeout)
	d.draining.Store(true)
	if err := public.Shutdown(s.ShutdownTimeout); err != nil {
		log.Warn("public listener shutdown", "err", err)
	}
	if lost := fwd.Drain(s.DrainTimeout); lost > 0 {
		log.Error("callback stopped with undelivered notices", "undelivered", lost)
	} else {
		log.Info("callback drained: every accepted notice was delivered")
	}
	if err := admin.Shutdown(s.ShutdownTimeout); err != nil {
		log.Warn("admin listener shutdown", "err", err)
	}
	return nil
}
