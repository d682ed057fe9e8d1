package config

import (
	"strings"
	"testing"
	"time"
)

type settings struct {
	Hours   int           `env:"X_HOURS" envDefault:"24"`
	Timeout time.Duration `env:"X_TIMEOUT" envDefault:"1s"`
	Loud    bool          `env:"X_LOUD"`
	Share   float64       `env:"X_SHARE"`
	Name    string        `env:"X_NAME" envDefault:"n"`
}

func TestLoadSaysWhatAVariableWants(t *testing.T) {
	for kv, want := range map[string]string{
		"X_HOURS=abc":   `X_HOURS: want a whole number, got "abc"`,
		"X_TIMEOUT=30":  `X_TIMEOUT: want a duration such as 500ms, 30s or 5m, got "30"`,
		"X_LOUD=yes!":   `X_LOUD: want true or false, got "yes!"`,
		"X_SHARE=half":  `X_SHARE: want a number, got "half"`,
		"X_HOURS=1.5":   `X_HOURS: want a whole number, got "1.5"`,
		"X_TIMEOUT=1 s": `X_TIMEOUT: want a duration such as 500ms, 30s or 5m, got "1 s"`,
	} {
		_, err := Load[settings]([]string{kv})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "strconv") {
			t.Errorf("%s: %v, want %q", kv, err, want)
		}
	}
	s, err := Load[settings]([]string{"X_HOURS=3", "X_TIMEOUT=250ms"})
	if err != nil || s.Hours != 3 || s.Timeout != 250*time.Millisecond || s.Name != "n" {
		t.Fatalf("Load = %+v, %v", s, err)
	}
}
