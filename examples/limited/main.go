// Command limited is a service that rate-limits its own callers with
// freqcap: each login attempt is checked against the counter's policy
// "login" (5 a minute and 20 a day, dev/limits.yaml), with local limiting,
// so that once the counter has refused a user, the attempts until its
// Retry-After are refused here without a round trip.
//
// Against make run (its defaults):
//
//	go run ./examples/limited
//
// Settings: COUNTER_URL, COUNTER_TOKEN, CHECK_TIMEOUT (a check's budget,
// 50ms).
package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/freqcap/freqcap/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "limited:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, getenv func(string) string) (err error) {
	counterURL := getenv("COUNTER_URL")
	if counterURL == "" {
		counterURL = "http://127.0.0.1:8081"
	}
	timeout := 50 * time.Millisecond
	if v := getenv("CHECK_TIMEOUT"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("CHECK_TIMEOUT: %w", err)
		}
	}
	// Once, at start-up.
	l, err := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: timeout, Local: true, Token: getenv("COUNTER_TOKEN")})
	if err != nil {
		return err
	}
	user := "user-" + rand.Text()[:10] // a new user each run
	for attempt := 1; attempt <= 8; attempt++ {
		v, err := l.Allow(ctx, "login", user)
		switch {
		case err != nil && v.Degraded:
			fmt.Fprintf(out, "attempt %d: admitted, the counter did not answer in time (%v)\n", attempt, err)
		case err != nil:
			return err // an invalid check: a bug on this side
		case v.Allowed:
			fmt.Fprintf(out, "attempt %d: admitted, %d left\n", attempt, v.Remaining)
		case v.Local:
			fmt.Fprintf(out, "attempt %d: refused here, retry in %s\n", attempt, v.RetryAfter().Round(time.Second))
		default:
			fmt.Fprintf(out, "attempt %d: refused by the counter, retry in %s\n", attempt, v.RetryAfter().Round(time.Second))
		}
	}
	return nil
}
