package main

import (
	"fmt"
	"net/url"
	"time"

	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/logging"
)

// Config is every setting of callback, read from the environment.
type Config struct {
	Addr            string        `env:"CALLBACK_ADDR" envDefault:":8080"`
	AdminAddr       string        `env:"CALLBACK_ADMIN_ADDR" envDefault:"127.0.0.1:9080"`
	CounterURL      string        `env:"COUNTER_URL" envDefault:"http://127.0.0.1:8081"`
	RedisURL        string        `env:"REDIS_URL" envDefault:"redis://127.0.0.1:6379"`
	SchemaRefresh   time.Duration `env:"CALLBACK_SCHEMA_REFRESH" envDefault:"30s"`
	CampaignsFile   string        `env:"CALLBACK_CAMPAIGNS_FILE"`
	CampaignTTL     time.Duration `env:"CALLBACK_CAMPAIGN_CACHE_TTL" envDefault:"1m"`
	JournalMax      int           `env:"CALLBACK_JOURNAL_MAX" envDefault:"1000000"`
	Partitions      int           `env:"CALLBACK_JOURNAL_PARTITIONS" envDefault:"8"`
	ClaimIdle       time.Duration `env:"CALLBACK_CLAIM_IDLE" envDefault:"30s"`
	AppendTimeout   time.Duration `env:"CALLBACK_APPEND_TIMEOUT" envDefault:"500ms"`
	FlushDelay      time.Duration `env:"CALLBACK_REDIS_FLUSH_DELAY" envDefault:"50us"`
	Workers         int           `env:"CALLBACK_WORKERS" envDefault:"32"`
	BatchSize       int           `env:"CALLBACK_BATCH_SIZE" envDefault:"100"`
	BatchWait       time.Duration `env:"CALLBACK_BATCH_WAIT" envDefault:"2ms"`
	ForwardTimeout  time.Duration `env:"CALLBACK_FORWARD_TIMEOUT" envDefault:"2s"`
	RetryInitial    time.Duration `env:"CALLBACK_RETRY_INITIAL" envDefault:"50ms"`
	RetryMax        time.Duration `env:"CALLBACK_RETRY_MAX" envDefault:"5s"`
	RetryFor        time.Duration `env:"CALLBACK_RETRY_FOR" envDefault:"5m"`
	DrainTimeout    time.Duration `env:"CALLBACK_DRAIN_TIMEOUT" envDefault:"30s"`
	ShutdownTimeout time.Duration `env:"CALLBACK_SHUTDOWN_TIMEOUT" envDefault:"5s"`
	Log             logging.Settings
}

// Settings is Config checked.
type Settings struct {
	Config
	Counter *url.URL
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
	switch {
	case cfg.Partitions < 1 || cfg.Partitions > 1024:
		return s, fmt.Errorf("CALLBACK_JOURNAL_PARTITIONS: must be between 1 and 1024, got %d", cfg.Partitions)
	case cfg.JournalMax < cfg.Partitions:
		return s, fmt.Errorf("CALLBACK_JOURNAL_MAX: must be at least CALLBACK_JOURNAL_PARTITIONS (%d), got %d", cfg.Partitions, cfg.JournalMax)
	case cfg.Workers < 1:
		return s, fmt.Errorf("CALLBACK_WORKERS: must be at least 1, got %d", cfg.Workers)
	case cfg.BatchSize < 1 || cfg.BatchSize > 1000:
		return s, fmt.Errorf("CALLBACK_BATCH_SIZE: must be between 1 and 1000 (the counter's COUNTER_MAX_BATCH), got %d", cfg.BatchSize)
	case cfg.BatchWait < 0 || cfg.BatchWait > time.Second:
		return s, fmt.Errorf("CALLBACK_BATCH_WAIT: must be between 0 and 1s, got %s", cfg.BatchWait)
	case cfg.FlushDelay < 0 || cfg.FlushDelay > time.Millisecond:
		return s, fmt.Errorf("CALLBACK_REDIS_FLUSH_DELAY: must be between 0 and 1ms, got %s", cfg.FlushDelay)
	}
	return s, nil
}
