package main

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	_ "time/tzdata" // a campaign's timezone loads on images without a zoneinfo database

	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/logging"
	"github.com/freqcap/freqcap/shared/signing"
)

// Config is every setting of callback, read from the environment.
type Config struct {
	Addr               string        `env:"CALLBACK_ADDR" envDefault:":8080" help:"public listener (exchanges)"`
	AdminAddr          string        `env:"CALLBACK_ADMIN_ADDR" envDefault:"127.0.0.1:9080" help:"admin listener: campaigns, health, metrics, pprof"`
	CounterToken       string        `env:"COUNTER_TOKEN" help:"bearer token sent to the counter (one of its COUNTER_AUTH_TOKENS)"`
	AdminTokenList     string        `env:"CALLBACK_ADMIN_TOKENS" help:"bearer tokens the admin API (/v1/campaigns) requires, comma separated; none: no authentication"`
	CounterURL         string        `env:"COUNTER_URL" envDefault:"http://127.0.0.1:8081" help:"the counter"`
	RedisURL           string        `env:"REDIS_URL" envDefault:"redis://127.0.0.1:6379" help:"rueidis URL redis://[user:pass@]host:port[/db] (?addr= more seed nodes; Cluster is detected)"`
	RedisPassword      string        `env:"REDIS_PASSWORD" help:"the Redis password, kept out of REDIS_URL (a password in REDIS_URL is used when this is empty)"`
	JournalRedisURL    string        `env:"CALLBACK_JOURNAL_REDIS_URL" help:"a Redis (or Cluster) of the journal's own, rueidis URL as REDIS_URL; none: the journal is kept in REDIS_URL's, with the campaigns and the counters. Apart, an append does not queue behind the counter's scripts, and the journal can have persistence of its own"`
	JournalPassword    string        `env:"CALLBACK_JOURNAL_REDIS_PASSWORD" help:"the password of CALLBACK_JOURNAL_REDIS_URL's Redis (a password in that URL is used when this is empty)"`
	SchemaRefresh      time.Duration `env:"CALLBACK_SCHEMA_REFRESH" envDefault:"30s" help:"how often the counter's GET /v1/schema is read"`
	SigningKeys        string        `env:"CALLBACK_SIGNING_KEYS" help:"kid:base64secret,... notice URLs must be signed with (several for rotation); none: notices are unauthenticated"`
	MaxNoticeAge       string        `env:"CALLBACK_MAX_NOTICE_AGE" envDefault:"win:30m,billing:4h,imp:4h,click:24h,conv:720h,loss:30m" help:"how far ahead a signed notice's exp may be, per event (event:duration,...; one duration for every event); callback remembers each notice until its exp"`
	AcceptV1           bool          `env:"CALLBACK_SIGNING_ACCEPT_V1" envDefault:"false" help:"also take version 1 signatures (no v=2), which do not cover the event, while bidders move to version 2"`
	UnknownCamps       string        `env:"CALLBACK_UNKNOWN_CAMPAIGNS" help:"refuse or count notices of campaigns the admin API does not know (default: refuse with signing keys, else count)"`
	SourceLimit        string        `env:"CALLBACK_SOURCE_LIMIT" help:"most notices one client IP may send this instance, <n>/<period> (e.g. 5000/1s); none: no limit"`
	TrustedProxies     string        `env:"CALLBACK_TRUSTED_PROXIES" help:"CIDRs of proxies whose X-Forwarded-For names the client, comma separated"`
	CampaignsFile      string        `env:"CALLBACK_CAMPAIGNS_FILE" help:"JSON campaigns seeded at start-up (only those Redis does not have)"`
	CampaignTTL        time.Duration `env:"CALLBACK_CAMPAIGN_CACHE_TTL" envDefault:"1m" help:"longest a cached campaign lives (Redis invalidates it at once on change)"`
	CampaignCacheBytes int           `env:"CALLBACK_CAMPAIGN_CACHE_BYTES" envDefault:"33554432" help:"bytes of campaigns (known and unknown) kept in client-side cache, per Redis node; least recently used go first"`
	JournalMax         int           `env:"CALLBACK_JOURNAL_MAX" envDefault:"1000000" help:"most undelivered notices in the journal before 503"`
	Partitions         int           `env:"CALLBACK_JOURNAL_PARTITIONS" envDefault:"8" help:"stream keys of the journal; the same for every instance"`
	JournalFormat      int           `env:"CALLBACK_JOURNAL_FORMAT" envDefault:"1" help:"how journal entries are written: 1, a field per value (what every version reads); 2, one field (fewer Redis instructions per notice; read from this version on: set it once every callback runs this version)"`
	ClaimIdle          time.Duration `env:"CALLBACK_CLAIM_IDLE" envDefault:"30s" help:"how long a taken entry may sit unfinished before another instance takes it over"`
	AppendTimeout      time.Duration `env:"CALLBACK_APPEND_TIMEOUT" envDefault:"500ms" help:"how long a notice waits for its journal write (and its replicas) before 503"`
	JournalReplicas    int           `env:"CALLBACK_JOURNAL_REPLICAS" envDefault:"0" help:"replicas a journal append must reach (WAIT) before the notice is answered; 0: the master's answer is enough"`
	FlushDelay         time.Duration `env:"CALLBACK_REDIS_FLUSH_DELAY" envDefault:"50us" help:"how long rueidis waits to send concurrent journal writes in one write"`
	Workers            int           `env:"CALLBACK_WORKERS" envDefault:"32" help:"concurrent forwarding requests"`
	BatchSize          int           `env:"CALLBACK_BATCH_SIZE" envDefault:"100" help:"most notices in one POST /v1/incr/batch"`
	BatchWait          time.Duration `env:"CALLBACK_BATCH_WAIT" envDefault:"2ms" help:"how long a reader waits for more notices after a short read, and at most how long a batch joining several partitions' reads waits for more before it is sent"`
	ForwardTimeout     time.Duration `env:"CALLBACK_FORWARD_TIMEOUT" envDefault:"2s" help:"deadline of one forwarding attempt"`
	RetryInitial       time.Duration `env:"CALLBACK_RETRY_INITIAL" envDefault:"50ms" help:"first backoff between attempts (doubling, with jitter)"`
	RetryMax           time.Duration `env:"CALLBACK_RETRY_MAX" envDefault:"5s" help:"longest backoff between attempts"`
	RetryFor           time.Duration `env:"CALLBACK_RETRY_FOR" envDefault:"5m" help:"how long a batch is retried before it is left for the next claim; at most half COUNTER_DEDUPE_TTL"`
	DeadLetterAfter    int           `env:"CALLBACK_DEAD_LETTER_AFTER" envDefault:"20" help:"answers in which the counter wrote other notices but not this one before it goes to the dead-letter stream (one Redis refuses outright goes at once)"`
	DrainTimeout       time.Duration `env:"CALLBACK_DRAIN_TIMEOUT" envDefault:"30s" help:"how long SIGTERM lets the deliveries under way finish"`
	ShutdownTimeout    time.Duration `env:"CALLBACK_SHUTDOWN_TIMEOUT" envDefault:"5s" help:"how long SIGTERM waits for in-flight requests"`
	Log                logging.Settings
}

// Settings is Config checked.
type Settings struct {
	Config
	Counter *url.URL
	// Keys are the notice signing keys; nil when notices are unsigned.
	Keys signing.Keys
	// NoticeAges is CALLBACK_MAX_NOTICE_AGE by event ("": any other).
	NoticeAges map[string]time.Duration
	// RefuseUnknown refuses notices of campaigns Redis does not have.
	RefuseUnknown bool
	// AdminTokens are the bearer tokens of the admin API; none when empty.
	AdminTokens []string
	// Sources limits notices per client IP; nil for no limit.
	Sources *sourceLimit
}

func loadSettings(environ []string) (Settings, error) {
	cfg, err := config.Load[Config](environ)
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Config: cfg}
	if s.Counter, err = url.Parse(cfg.CounterURL); err != nil || (s.Counter.Scheme != "http" && s.Counter.Scheme != "https") || s.Counter.Host == "" {
		return s, fmt.Errorf("COUNTER_URL: want http(s)://host:port, got %q", cfg.CounterURL)
	}
	for name, d := range map[string]time.Duration{
		"CALLBACK_CAMPAIGN_CACHE_TTL": cfg.CampaignTTL, "CALLBACK_FORWARD_TIMEOUT": cfg.ForwardTimeout,
		"CALLBACK_RETRY_INITIAL": cfg.RetryInitial, "CALLBACK_RETRY_MAX": cfg.RetryMax, "CALLBACK_RETRY_FOR": cfg.RetryFor,
		"CALLBACK_DRAIN_TIMEOUT": cfg.DrainTimeout, "CALLBACK_CLAIM_IDLE": cfg.ClaimIdle, "CALLBACK_APPEND_TIMEOUT": cfg.AppendTimeout,
		"CALLBACK_SCHEMA_REFRESH": cfg.SchemaRefresh, "CALLBACK_SHUTDOWN_TIMEOUT": cfg.ShutdownTimeout,
	} {
		if d <= 0 {
			return s, fmt.Errorf("%s: must be positive, got %s", name, d)
		}
	}
	if s.AdminTokens, err = auth.Tokens("CALLBACK_ADMIN_TOKENS", cfg.AdminTokenList); err != nil {
		return s, err
	}
	if s.Sources, err = parseSourceLimit(cfg.SourceLimit, cfg.TrustedProxies); err != nil {
		return s, err
	}
	if cfg.SigningKeys != "" {
		if s.Keys, err = signing.ParseKeys(cfg.SigningKeys); err != nil {
			return s, fmt.Errorf("CALLBACK_SIGNING_KEYS: %w", err)
		}
	}
	if s.NoticeAges, err = parseNoticeAges(cfg.MaxNoticeAge); err != nil {
		return s, fmt.Errorf("CALLBACK_MAX_NOTICE_AGE: %w", err)
	}
	switch cfg.UnknownCamps {
	case "":
		s.RefuseUnknown = s.Keys != nil
	case "refuse", "count":
		s.RefuseUnknown = cfg.UnknownCamps == "refuse"
	default:
		return s, fmt.Errorf("CALLBACK_UNKNOWN_CAMPAIGNS: want refuse or count, got %q", cfg.UnknownCamps)
	}
	return s, checkBounds(cfg)
}

// checkBounds checks the settings that must lie within bounds.
func checkBounds(cfg Config) error {
	switch {
	case cfg.Partitions < 1 || cfg.Partitions > 1024:
		return fmt.Errorf("CALLBACK_JOURNAL_PARTITIONS: must be between 1 and 1024, got %d", cfg.Partitions)
	case cfg.JournalMax < cfg.Partitions:
		return fmt.Errorf("CALLBACK_JOURNAL_MAX: must be at least CALLBACK_JOURNAL_PARTITIONS (%d), got %d", cfg.Partitions, cfg.JournalMax)
	case cfg.JournalFormat != 1 && cfg.JournalFormat != 2:
		return fmt.Errorf("CALLBACK_JOURNAL_FORMAT: must be 1 (a field per value) or 2 (one field), got %d", cfg.JournalFormat)
	case cfg.JournalReplicas < 0 || cfg.JournalReplicas > 16:
		return fmt.Errorf("CALLBACK_JOURNAL_REPLICAS: must be between 0 and 16, got %d", cfg.JournalReplicas)
	case cfg.CampaignCacheBytes < 1<<20:
		return fmt.Errorf("CALLBACK_CAMPAIGN_CACHE_BYTES: must be at least 1048576 (1 MiB), got %d", cfg.CampaignCacheBytes)
	case cfg.DeadLetterAfter < 1:
		return fmt.Errorf("CALLBACK_DEAD_LETTER_AFTER: must be at least 1, got %d", cfg.DeadLetterAfter)
	case cfg.Workers < 1:
		return fmt.Errorf("CALLBACK_WORKERS: must be at least 1, got %d", cfg.Workers)
	case cfg.BatchSize < 1 || cfg.BatchSize > 1000:
		return fmt.Errorf("CALLBACK_BATCH_SIZE: must be between 1 and 1000 (the counter's COUNTER_MAX_BATCH), got %d", cfg.BatchSize)
	case cfg.BatchWait < 0 || cfg.BatchWait > time.Second:
		return fmt.Errorf("CALLBACK_BATCH_WAIT: must be between 0 and 1s, got %s", cfg.BatchWait)
	case cfg.FlushDelay < 0 || cfg.FlushDelay > time.Millisecond:
		return fmt.Errorf("CALLBACK_REDIS_FLUSH_DELAY: must be between 0 and 1ms, got %s", cfg.FlushDelay)
	}
	return nil
}

// parseNoticeAges reads CALLBACK_MAX_NOTICE_AGE: one duration for every
// event, or event:duration pairs (events not named get the longest).
func parseNoticeAges(v string) (map[string]time.Duration, error) {
	if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil {
		if d <= 0 {
			return nil, fmt.Errorf("must be positive, got %s", d)
		}
		return map[string]time.Duration{"": d}, nil
	}
	out := map[string]time.Duration{}
	for _, pair := range config.List(v) {
		event, dv, ok := strings.Cut(pair, ":")
		d, err := time.ParseDuration(dv)
		switch {
		case !ok || event == "" || err != nil:
			return nil, fmt.Errorf("want a duration or event:duration,... (win:30m,billing:4h,imp:4h), got %q", pair)
		case d <= 0:
			return nil, fmt.Errorf("%s: must be positive, got %s", event, d)
		}
		if _, dup := out[event]; dup {
			return nil, fmt.Errorf("%s is given twice", event)
		}
		out[event] = d
		out[""] = max(out[""], d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}
