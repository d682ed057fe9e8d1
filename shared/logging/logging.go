// Package logging builds the services' slog logger: colourful text via tint
// for a human at a terminal, JSON for machines.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/lmittmann/tint"
)

// Settings are the logging variables every service shares.
type Settings struct {
	Level  string `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	Format string `env:"LOG_FORMAT" envDefault:"auto" help:"text, json, or auto (text on a terminal)"`
}

// New returns a logger writing to w. Format "auto" picks text when w is a
// terminal and JSON otherwise.
func New(w io.Writer, s Settings) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(s.Level)); err != nil {
		return nil, fmt.Errorf("LOG_LEVEL: %w", err)
	}
	format := strings.ToLower(s.Format)
	if format == "auto" {
		format = "json"
		if isTerminal(w) {
			format = "text"
		}
	}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDurations})), nil
	case "text":
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)})), nil
	default:
		return nil, fmt.Errorf("LOG_FORMAT: want auto, json or text, got %q", s.Format)
	}
}

// readableDurations writes durations as Go writes them ("30s", "1.5ms"),
// not as nanoseconds: a JSON log is read by people too.
func readableDurations(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
