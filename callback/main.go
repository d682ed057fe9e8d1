// Command callback faces ad exchanges: it takes win, billing and impression
// notices, writes each to a journal in Redis before it answers, and
// forwards them in batches to the counter off the exchange's path, retried
// until each is counted.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/buildinfo"
	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/httpmetrics"
	"github.com/freqcap/freqcap/shared/httpserver"
	"github.com/freqcap/freqcap/shared/logging"
	"github.com/freqcap/freqcap/shared/redisconn"
	"github.com/freqcap/freqcap/shared/signing"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Environ(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "callback:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, environ []string, stdout io.Writer) error {
	usage := func(w io.Writer) {
		config.Usage[Config](w, "callback", "takes win, billing and impression notices from ad exchanges and has the counter count them (freqcap)")
	}
	if done, err := config.Args(args, stdout, usage, buildinfo.Version("callback")); done || err != nil {
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
	rdb, jdb, closeRedis, err := openRedis(s)
	if err != nil {
		return err
	}
	defer closeRedis()

	schema, err := startSchema(ctx, s, log)
	if err != nil {
		return err
	}
	campaigns, err := loadCampaigns(ctx, s, rdb, schema, log)
	if err != nil {
		return err
	}

	reg := newRegistry()
	journal, fwd, err := startDelivery(ctx, s, jdb, schema, campaigns, log, reg)
	if err != nil {
		return err
	}
	if jdb != rdb {
		if moved := deliverMoved(ctx, s, rdb, schema, campaigns, log, fwd.metrics); moved != nil {
			defer moved.Drain(s.DrainTimeout)
		}
	}
	d := deps{log: log, settings: s, campaigns: campaigns, journal: journal, schema: schema, metrics: fwd.metrics, draining: &atomic.Bool{}, registry: reg,
		httpMetrics: httpmetrics.New(reg, "callback"), verifier: verifierOf(s, log)}
	public, admin, err := listen(d)
	if err != nil {
		return err
	}
	log.Info("callback listening", "addr", public.Addr(), "admin", admin.Addr(), "counter", s.CounterURL, "commit", buildinfo.Read().Commit)

	if err := serve(ctx, public, admin); err != nil {
		return err
	}
	stop(s, log, d.draining, public, admin, fwd)
	return nil
}

// newRegistry is callback's metrics registry, with its build, Go and
// process metrics.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	buildinfo.Register(reg, "callback")
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serve waits until a listener fails (its error) or ctx ends (nil).
func serve(ctx context.Context, public, admin *httpserver.Server) error {
	select {
	case err := <-public.Err():
		return err
	case err := <-admin.Err():
		return err
	case <-ctx.Done():
		return nil
	}
}

// openRedis opens REDIS_URL's client (campaigns) and the journal's: the
// same one, or CALLBACK_JOURNAL_REDIS_URL's. closeRedis closes what was
// opened.
func openRedis(s Settings) (rdb, jdb rueidis.Client, closeRedis func(), err error) {
	if rdb, err = redisconn.Open(s.RedisURL, tuneRedis(s, s.RedisPassword)); err != nil {
		return nil, nil, nil, err
	}
	if s.JournalRedisURL == "" {
		return rdb, rdb, rdb.Close, nil
	}
	if jdb, err = redisconn.Open(s.JournalRedisURL, tuneRedis(s, s.JournalPassword)); err != nil {
		rdb.Close()
		return nil, nil, nil, fmt.Errorf("CALLBACK_JOURNAL_REDIS_URL: %w", err)
	}
	return rdb, jdb, func() { jdb.Close(); rdb.Close() }, nil
}

// listen opens the public (notices) and admin listeners.
func listen(d deps) (public, admin *httpserver.Server, err error) {
	public, err = httpserver.ListenWith(d.settings.Addr, "CALLBACK_ADDR", NewServer(d), httpserver.Public)
	if err != nil {
		return nil, nil, err
	}
	admin, err = httpserver.Listen(d.settings.AdminAddr, "CALLBACK_ADMIN_ADDR", NewAdminServer(d))
	if err != nil {
		public.Close()
		return nil, nil, err
	}
	return public, admin, nil
}

// loadCampaigns are the campaigns in Redis, seeded from
// CALLBACK_CAMPAIGNS_FILE when it is set.
func loadCampaigns(ctx context.Context, s Settings, rdb rueidis.Client, schema *Schema, log *slog.Logger) (*Campaigns, error) {
	campaigns := &Campaigns{rdb: rdb, ttl: s.CampaignTTL, schema: schema.Get}
	if s.CampaignsFile != "" {
		stored, kept, err := campaigns.LoadFile(ctx, s.CampaignsFile)
		if err != nil {
			return nil, err
		}
		log.Info("campaigns seeded", "file", s.CampaignsFile, "stored", stored, "already_in_redis", kept)
	}
	return campaigns, nil
}

// startDelivery sets the journal up and starts its forwarder.
func startDelivery(ctx context.Context, s Settings, rdb rueidis.Client, schema *Schema, campaigns *Campaigns, log *slog.Logger, reg *prometheus.Registry) (*Journal, *Forwarder, error) {
	journal := newJournal(rdb, s.Partitions, s.JournalMax, consumerName())
	journal.packed = s.JournalFormat == 2
	if err := journal.Setup(ctx); err != nil {
		return nil, nil, err
	}
	if s.JournalReplicas > 0 {
		journal.Replicate(ctx, s.JournalReplicas, s.AppendTimeout)
		redisconn.ReportReplicas(ctx, log, rdb, s.JournalReplicas, "CALLBACK_JOURNAL_REPLICAS", "journal appends", "its notices get 503")
	}
	fwd := newForwarder(s, journal, schema, campaigns, log)
	fwd.metrics = newMetrics(reg, journal)
	fwd.Start()
	return journal, fwd, nil
}

// deliverMoved delivers what a journal left in REDIS_URL's Redis holds
// when the journal has a Redis of its own (CALLBACK_JOURNAL_REDIS_URL set
// while notices were still undelivered there, or while callbacks without
// it still run): a forwarder of its own reads it (and claims what stopped
// instances had read) until this instance stops. Nil when that journal
// holds nothing undelivered and no callback read it within
// CALLBACK_CLAIM_IDLE.
func deliverMoved(ctx context.Context, s Settings, rdb rueidis.Client, schema *Schema, campaigns *Campaigns, log *slog.Logger, m *metrics) *Forwarder {
	old := newJournal(rdb, s.Partitions, s.JournalMax, consumerName()+movedConsumer)
	// Callbacks without the setting may still be running (a rolling move,
	// active): their notices are delivered too, by them or by this
	// instance once they stop, though the journal may look empty now.
	st, err := old.Stats(ctx)
	active := false
	if err == nil {
		active, err = old.Active(ctx, s.ClaimIdle)
	}
	if err != nil {
		log.Warn("REDIS_URL's journal unreadable: notices a callback left there before CALLBACK_JOURNAL_REDIS_URL was set are not delivered by this instance", "err", err)
		return nil
	}
	if st.dead > 0 {
		log.Warn("REDIS_URL's Redis holds dead letters of the journal before CALLBACK_JOURNAL_REDIS_URL: the admin API serves only the new journal's", "dead_letters", st.dead)
	}
	if st.undelivered == 0 && st.pending == 0 && !active {
		return nil
	}
	log.Warn("REDIS_URL's Redis holds the journal of callbacks before CALLBACK_JOURNAL_REDIS_URL: delivering its notices too", "undelivered", st.undelivered, "pending", st.pending, "in_use", active)
	fwd := newForwarder(s, old, schema, campaigns, log)
	fwd.metrics = m
	fwd.Start()
	return fwd
}

// movedConsumer ends the consumer name of a forwarder on a moved journal,
// so that its own reads do not count as a callback still using that
// journal (Journal.Active): once drained, the next start leaves it alone
// (on Redis 7.2 and later, where reads that find nothing count as use).
const movedConsumer = "-moved"

// verifierOf checks notices' signatures with the settings' keys; nil
// without keys (notices are then unauthenticated, which it warns of).
func verifierOf(s Settings, log *slog.Logger) *signing.Verifier {
	if s.Keys == nil {
		log.Warn("CALLBACK_SIGNING_KEYS is not set: notices are UNAUTHENTICATED, anyone who can reach the public port can count for any campaign; set signing keys before exposing it")
		return nil
	}
	log.Info("notices must be signed", "keys", slices.Sorted(maps.Keys(s.Keys)), "unknown_campaigns", map[bool]string{true: "refuse", false: "count"}[s.RefuseUnknown])
	return &signing.Verifier{Keys: s.Keys, MaxAge: s.NoticeAges, AcceptV1: s.AcceptV1, Now: time.Now}
}

// startSchema reads the counter's schema (refusing a CALLBACK_RETRY_FOR
// its dedupe window cannot cover) and keeps it fresh until ctx ends; a
// counter not up yet is read later.
func startSchema(ctx context.Context, s Settings, log *slog.Logger) (*Schema, error) {
	schema := newSchema(s.Counter, s.CounterToken, log)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	sch, err := schema.Fetch(fctx)
	cancel()
	switch {
	case err != nil:
		log.Warn("counter schema unknown yet: notices are kept with every parameter named like a dimension until the counter answers", "err", err)
	case sch.DedupeTTLSec > 0 && s.RetryFor > safeRetryFor(sch):
		return nil, fmt.Errorf("CALLBACK_RETRY_FOR=%s: must be at most half the counter's COUNTER_DEDUPE_TTL (%ds), so a retried write is still recognised by its eid and never counts twice", s.RetryFor, sch.DedupeTTLSec)
	}
	go schema.Keep(ctx, s.SchemaRefresh)
	return schema, nil
}

// stop refuses new notices, lets the deliveries under way finish, then
// closes the listeners; what is left stays in the journal.
func stop(s Settings, log *slog.Logger, draining *atomic.Bool, public, admin *httpserver.Server, fwd *Forwarder) {
	log.Info("callback stopping: refusing new notices, finishing the deliveries under way", "timeout", s.DrainTimeout)
	draining.Store(true)
	if err := public.Shutdown(s.ShutdownTimeout); err != nil {
		log.Warn("public listener shutdown", "err", err)
	}
	if left := fwd.Drain(s.DrainTimeout); left > 0 {
		log.Warn("callback stopped: notices under way left in the journal for another instance or the next run", "left", left)
	} else {
		log.Info("callback stopped: every delivery under way finished")
	}
	if err := admin.Shutdown(s.ShutdownTimeout); err != nil {
		log.Warn("admin listener shutdown", "err", err)
	}
}

// tuneRedis sets callback's Redis client options, with password (when not
// empty) over the URL's.
func tuneRedis(s Settings, password string) func(*rueidis.ClientOption) {
	return func(opt *rueidis.ClientOption) {
		// Journal appends of concurrent notices share one write to Redis.
		opt.MaxFlushDelay = s.FlushDelay
		// The campaigns' client-side cache, unknown campaigns included:
		// bounded, least recently used entries go first.
		opt.CacheSizeEachConn = s.CampaignCacheBytes
		if password != "" {
			opt.Password = password
		}
	}
}
