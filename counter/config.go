package main

import (
	"fmt"
	"regexp"
	"slices"
	"time"
	_ "time/tzdata" // COUNTER_TIMEZONE works on images without a zoneinfo database

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/ratelimit"

	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/logging"
)

// Config is every setting of the counter, read from the environment.
type Config struct {
	Addr             string        `env:"COUNTER_ADDR" envDefault:":8081" help:"listen address"`
	OpsAddr          string        `env:"COUNTER_OPS_ADDR" envDefault:"127.0.0.1:9081" help:"ops listener: metrics, pprof, health (no token)"`
	AuthTokens       string        `env:"COUNTER_AUTH_TOKENS" help:"bearer tokens the API requires, comma separated (several for rotation); none: no authentication"`
	RedisURL         string        `env:"REDIS_URL" envDefault:"redis://127.0.0.1:6379" help:"rueidis URL redis://[user:pass@]host:port[/db] (?addr= more seed nodes; Cluster is detected)"`
	RedisPassword    string        `env:"REDIS_PASSWORD" help:"the Redis password, kept out of REDIS_URL (a password in REDIS_URL is used when this is empty)"`
	Timezone         string        `env:"COUNTER_TIMEZONE" envDefault:"UTC" help:"IANA zone whose midnight ends the natural day"`
	Dimensions       string        `env:"COUNTER_DIMENSIONS" envDefault:"device,bundle,tagid,ip_ua,household" help:"dimension parameter names: the identities (device, ip_ua, household) and what else is capped on"`
	CachedDims       string        `env:"COUNTER_CACHED_DIMENSIONS" envDefault:"bundle,tagid" help:"dimensions read through client-side caching (hot keys)"`
	Events           string        `env:"COUNTER_EVENTS" envDefault:"win,billing,imp,click,conv" help:"allowed events; the first is the default"`
	MaxWindowHours   int           `env:"COUNTER_MAX_WINDOW_HOURS" envDefault:"168" help:"largest hour window, and the hours every hour hash keeps"`
	MaxPaceWindowSec int           `env:"COUNTER_MAX_PACE_WINDOW_SEC" envDefault:"604800" help:"largest paceWindowSec / windowSec"`
	MaxSpanSec       int           `env:"COUNTER_MAX_SPAN_SEC" envDefault:"2592000" help:"largest span of a seconds window (AddFreq TIME_UNIT_SEC)"`
	MaxSpanDays      int           `env:"COUNTER_MAX_SPAN_DAYS" envDefault:"366" help:"largest span of a day window (AddFreq TIME_UNIT_DAY)"`
	MaxBatch         int           `env:"COUNTER_MAX_BATCH" envDefault:"1000" help:"most items in one batch"`
	MaxReadBatch     int           `env:"COUNTER_MAX_READ_BATCH" envDefault:"200" help:"most queries in one read batch (POST /v1/freq/batch, BatchGetFreq): what one Redis serves within COUNTER_READ_TIMEOUT"`
	CacheTTL         time.Duration `env:"COUNTER_CACHE_TTL" envDefault:"10s" help:"longest a cached count lives (Redis invalidates it at once on change)"`
	CacheMB          int           `env:"COUNTER_CACHE_MB" envDefault:"128" help:"memory for client-side cached counts, in MiB (all Redis connections together)"`
	ReadFrom         string        `env:"COUNTER_READ_FROM" envDefault:"primary" help:"primary or replica: where reads go on a Redis Cluster (replica: counts lag writes by the replication delay; writes and rate-limit checks always go to the primary)"`
	ReadTimeout      time.Duration `env:"COUNTER_READ_TIMEOUT" envDefault:"5ms" help:"hard deadline of every read and rate-limit check"`
	WriteTimeout     time.Duration `env:"COUNTER_WRITE_TIMEOUT" envDefault:"1s" help:"deadline of a write"`
	WriteReplicas    int           `env:"COUNTER_WRITE_REPLICAS" envDefault:"0" help:"replicas a write must reach (WAIT) before it is answered as written; 0: the master's answer is enough"`
	HotKeyRate       float64       `env:"COUNTER_HOT_KEY_RATE" envDefault:"100" help:"reads a second that make a counter read straight from Redis (a device) go through client-side caching while it stays hot; 0: never"`
	HotKeys          int           `env:"COUNTER_HOT_KEYS" envDefault:"64" help:"counters the hot-key sketch tracks (Space-Saving)"`
	StaleMax         time.Duration `env:"COUNTER_STALE_MAX" envDefault:"60s" help:"how old a last-known value may be to answer a read Redis cannot serve in time (0: answer 0, degraded)"`
	StaleCacheMB     int           `env:"COUNTER_STALE_CACHE_MB" envDefault:"64" help:"memory for last-known values, in MiB"`
	ReserveTTL       time.Duration `env:"COUNTER_RESERVE_TTL" envDefault:"3s" help:"how long an in-flight bid stays reserved (POST /v1/reserve) when the request gives no ttlMs: about the time a win notice takes to arrive; at most COUNTER_DEDUPE_TTL"`
	DedupeTTL        time.Duration `env:"COUNTER_DEDUPE_TTL" envDefault:"10m" help:"how long an eid is remembered, from the last write that counted it"`
	FlushDelay       time.Duration `env:"COUNTER_REDIS_FLUSH_DELAY" envDefault:"50us" help:"how long rueidis may hold a write so concurrent commands share it (0..1ms)"`
	ShutdownTimeout  time.Duration `env:"COUNTER_SHUTDOWN_TIMEOUT" envDefault:"10s" help:"how long SIGTERM waits for in-flight requests"`
	LimitsFile       string        `env:"COUNTER_LIMITS_FILE" help:"named rate-limit policies, YAML or JSON"`
	ViewsPerArticle  string        `env:"COUNTER_VIEWS_PER_ARTICLE" envDefault:"sliding_log:1/10m" help:"the view counter's limit per viewer and article, <algorithm>:<limit>/<period> or none"`
	ViewsPerViewer   string        `env:"COUNTER_VIEWS_PER_VIEWER" envDefault:"sliding_window:100/1h" help:"the view counter's limit per viewer across articles, or none"`
	Log              logging.Settings
}

// Settings is Config checked and turned into the values the store and the
// handlers use.
type Settings struct {
	Config
	Location   *time.Location
	Dimensions []string
	Cached     map[string]bool
	Events     []string
	// Tokens are the bearer tokens the API requires; none when empty.
	Tokens []string
	// Policies are the named rate-limit policies of COUNTER_LIMITS_FILE.
	Policies map[string]*ratelimit.Policy
	// Views is the view counter's limits; perArticle says whether its
	// first limit is per viewer and article.
	Views      *ratelimit.Policy
	PerArticle bool
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// reserved are query parameters that a dimension must not shadow.
var reserved = []string{"cid", "event", "windowHours", "eid", "paceWindowSec", "windowSec", "limit", "minGapSec"}

func loadSettings(environ []string) (Settings, error) {
	cfg, err := config.Load[Config](environ)
	if err != nil {
		return Settings{}, err
	}
	s := Settings{Config: cfg, Cached: map[string]bool{}}
	if s.Location, err = time.LoadLocation(cfg.Timezone); err != nil {
		return s, fmt.Errorf("COUNTER_TIMEZONE: %w", err)
	}
	if s.Tokens, err = auth.Tokens("COUNTER_AUTH_TOKENS", cfg.AuthTokens); err != nil {
		return s, err
	}
	if err := s.names(); err != nil {
		return s, err
	}
	if err := cfg.bounds(); err != nil {
		return s, err
	}
	if s.Policies, err = ratelimit.LoadPolicies(cfg.LimitsFile, s.limits()); err != nil {
		return s, fmt.Errorf("COUNTER_LIMITS_FILE: %w", err)
	}
	if s.Views, s.PerArticle, err = ratelimit.ViewPolicy(cfg.ViewsPerArticle, cfg.ViewsPerViewer, s.limits()); err != nil {
		return s, err
	}
	return s, nil
}

// limits are what items are checked against, from the settings.
func (s Settings) limits() *core.Limits {
	return &core.Limits{Dimensions: s.Dimensions, Events: s.Events, MaxHours: s.MaxWindowHours,
		MaxSliding: s.MaxPaceWindowSec, MaxSeconds: s.MaxSpanSec, MaxDays: s.MaxSpanDays}
}

// storeOptions are the core store's options from the settings.
func (s Settings) storeOptions(hooks redisHooks, now func() time.Time) core.Options {
	cached := []string{}
	for d := range s.Cached {
		cached = append(cached, d)
	}
	return core.Options{
		Location: s.Location, Now: now, Limits: *s.limits(), CachedDims: cached, CacheTTL: s.CacheTTL,
		DedupeTTL: s.DedupeTTL, ReadTimeout: s.ReadTimeout, StaleMax: s.StaleMax, StaleCacheMB: s.StaleCacheMB,
		HotKeys: s.HotKeys, HotKeyRate: s.HotKeyRate, WriteReplicas: s.WriteReplicas, WriteTimeout: s.WriteTimeout,
		Reach: hooks.reach, Cache: hooks.cache,
	}
}

// names reads the dimensions, cached dimensions and events.
func (s *Settings) names() error {
	cfg := &s.Config
	s.Dimensions = config.List(cfg.Dimensions)
	if len(s.Dimensions) == 0 {
		return fmt.Errorf("COUNTER_DIMENSIONS: at least one dimension is required")
	}
	for i, d := range s.Dimensions {
		if !nameRE.MatchString(d) || slices.Contains(reserved, d) || slices.Contains(s.Dimensions[:i], d) {
			return fmt.Errorf("COUNTER_DIMENSIONS: %q must be a unique lower-case name ([a-z][a-z0-9_]*) other than %v", d, reserved)
		}
	}
	for _, d := range config.List(cfg.CachedDims) {
		if !slices.Contains(s.Dimensions, d) {
			return fmt.Errorf("COUNTER_CACHED_DIMENSIONS: %q is not in COUNTER_DIMENSIONS", d)
		}
		s.Cached[d] = true
	}
	s.Events = config.List(cfg.Events)
	if len(s.Events) == 0 {
		return fmt.Errorf("COUNTER_EVENTS: at least one event is required")
	}
	for i, e := range s.Events {
		if !nameRE.MatchString(e) || slices.Contains(s.Events[:i], e) {
			return fmt.Errorf("COUNTER_EVENTS: %q must be a unique lower-case name ([a-z][a-z0-9_]*)", e)
		}
	}
	return nil
}

// bounds checks the settings that are numbers and durations.
func (cfg *Config) bounds() error {
	switch {
	case cfg.MaxWindowHours < 1 || cfg.MaxWindowHours > 24*366:
		return fmt.Errorf("COUNTER_MAX_WINDOW_HOURS: must be between 1 and %d, got %d", 24*366, cfg.MaxWindowHours)
	case cfg.MaxPaceWindowSec < 1:
		return fmt.Errorf("COUNTER_MAX_PACE_WINDOW_SEC: must be at least 1, got %d", cfg.MaxPaceWindowSec)
	case cfg.MaxSpanSec < 1:
		return fmt.Errorf("COUNTER_MAX_SPAN_SEC: must be at least 1, got %d", cfg.MaxSpanSec)
	case cfg.MaxSpanDays < 1 || cfg.MaxSpanDays > 3660:
		return fmt.Errorf("COUNTER_MAX_SPAN_DAYS: must be between 1 and 3660, got %d", cfg.MaxSpanDays)
	case cfg.MaxBatch < 1:
		return fmt.Errorf("COUNTER_MAX_BATCH: must be at least 1, got %d", cfg.MaxBatch)
	case cfg.MaxReadBatch < 1:
		return fmt.Errorf("COUNTER_MAX_READ_BATCH: must be at least 1, got %d", cfg.MaxReadBatch)
	case cfg.ReadFrom != "primary" && cfg.ReadFrom != "replica":
		return fmt.Errorf("COUNTER_READ_FROM: want primary or replica, got %q", cfg.ReadFrom)
	case cfg.ReadTimeout <= 0:
		return fmt.Errorf("COUNTER_READ_TIMEOUT: must be positive, got %s", cfg.ReadTimeout)
	case cfg.WriteReplicas < 0 || cfg.WriteReplicas > 16:
		return fmt.Errorf("COUNTER_WRITE_REPLICAS: must be between 0 and 16, got %d", cfg.WriteReplicas)
	case cfg.WriteTimeout <= 0:
		return fmt.Errorf("COUNTER_WRITE_TIMEOUT: must be positive, got %s", cfg.WriteTimeout)
	case cfg.CacheTTL <= 0:
		return fmt.Errorf("COUNTER_CACHE_TTL: must be positive, got %s", cfg.CacheTTL)
	case cfg.FlushDelay < 0 || cfg.FlushDelay > time.Millisecond:
		return fmt.Errorf("COUNTER_REDIS_FLUSH_DELAY: must be between 0 and 1ms, got %s", cfg.FlushDelay)
	case cfg.ReserveTTL < time.Millisecond || cfg.ReserveTTL > time.Hour || cfg.ReserveTTL > cfg.DedupeTTL:
		return fmt.Errorf("COUNTER_RESERVE_TTL: must be between 1ms and 1h, and at most COUNTER_DEDUPE_TTL (a win finds its reservation by its eid), got %s", cfg.ReserveTTL)
	case cfg.DedupeTTL <= 0:
		return fmt.Errorf("COUNTER_DEDUPE_TTL: must be positive, got %s", cfg.DedupeTTL)
	case cfg.HotKeyRate < 0:
		return fmt.Errorf("COUNTER_HOT_KEY_RATE: must be 0 or more, got %g", cfg.HotKeyRate)
	case cfg.HotKeys < 1 || cfg.HotKeys > 100_000:
		return fmt.Errorf("COUNTER_HOT_KEYS: must be between 1 and 100000, got %d", cfg.HotKeys)
	case cfg.StaleMax < 0:
		return fmt.Errorf("COUNTER_STALE_MAX: must be 0 or more, got %s", cfg.StaleMax)
	case cfg.CacheMB < 1 || cfg.CacheMB > 1<<16:
		return fmt.Errorf("COUNTER_CACHE_MB: must be between 1 and 65536, got %d", cfg.CacheMB)
	case cfg.StaleCacheMB < 1 || cfg.StaleCacheMB > 1<<16:
		return fmt.Errorf("COUNTER_STALE_CACHE_MB: must be between 1 and 65536, got %d", cfg.StaleCacheMB)
	}
	return nil
}
