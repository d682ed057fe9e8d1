// Command bidder is the bidder's side of freqcap in one program: for a bid
// request it asks the counter about its candidate campaigns (one Decide),
// signs the notice URLs of the campaign it bids with, sends the win notice
// as the exchange would, and asks again: the campaign, capped at one win
// per device a day, is now blocked.
//
// Against make run (its defaults):
//
//	go run ./examples/bidder
//
// Settings: COUNTER_URL, CALLBACK_URL, SIGNING_KEY (kid:base64secret, one of
// callback's CALLBACK_SIGNING_KEYS; make run's development key by
// default), COUNTER_TOKEN, DECIDE_TIMEOUT (the bid path's budget for a
// Decide, 50ms).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/freqcap/freqcap/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "bidder:", err)
		os.Exit(1)
	}
}

// devKey is make run's development signing key (never use it elsewhere).
const devKey = "dev:ZnJlcWNhcC1kZXYtc2lnbmluZy1rZXk="

func run(ctx context.Context, out io.Writer, getenv func(string) string) error {
	fc, signer, err := setUp(getenv)
	if err != nil {
		return err
	}
	defer fc.Close()

	// A bid request: a device (new each run), the app and ad slot, and the
	// campaigns that could answer it, each with its caps.
	ids := client.Identities{"device": "example-" + rand.Text()[:12], "bundle": "com.example.app", "tagid": "banner-1"}
	candidates := []client.Candidate{
		{CID: "42", Caps: []client.Cap{{Dim: "device", Day: 1}}},                                          // once a day per device
		{CID: "43", Caps: []client.Cap{{Dim: "device", Windows: []client.Window{{Hours: 24, Limit: 5}}}}}, // 5 in 24 hours
	}
	decide := func() ([]client.Decision, error) {
		// On an error the decisions are still there: allowed and Degraded
		// (fail open).
		return fc.Decide(ctx, ids, candidates)
	}
	show := func(when string, ds []client.Decision) {
		for _, d := range ds {
			fmt.Fprintf(out, "%s: %s\n", when, d)
		}
	}
	ds, err := decide()
	if err != nil {
		return err
	}
	show("before the win", ds)

	if err := bidAndWin(out, signer, ids); err != nil {
		return err
	}

	// callback has kept the notice; its forwarder has it counted within
	// milliseconds. The next bid request for this device sees it: ask
	// until it does, and show that decision.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds, err := decide()
		if err != nil {
			return err
		}
		if !ds[0].Allowed {
			show("after the win", ds)
			return nil
		}
		if time.Now().After(deadline) {
			show("after the win", ds)
			return errors.New("the win was not counted within 5 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setUp reads the settings: the counter's and callback's URLs, the signing
// key, the deadline; and makes, once at start-up, one client for the whole
// process and the notice signer.
func setUp(getenv func(string) string) (*client.Client, client.NoticeSigner, error) {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	counterURL, callbackURL := or("COUNTER_URL", "http://127.0.0.1:8081"), or("CALLBACK_URL", "http://127.0.0.1:8080")
	kid, secret64, _ := strings.Cut(or("SIGNING_KEY", devKey), ":")
	secret, err := base64.StdEncoding.DecodeString(secret64) // CALLBACK_SIGNING_KEYS holds it in base64
	if err != nil {
		return nil, client.NoticeSigner{}, fmt.Errorf("SIGNING_KEY: want kid:base64secret: %w", err)
	}
	timeout, err := time.ParseDuration(or("DECIDE_TIMEOUT", "50ms"))
	if err != nil {
		return nil, client.NoticeSigner{}, fmt.Errorf("DECIDE_TIMEOUT: %w", err)
	}
	fc, err := client.New(counterURL, client.Options{Timeout: timeout, Token: getenv("COUNTER_TOKEN")})
	if err != nil {
		return nil, client.NoticeSigner{}, err
	}
	return fc, client.NoticeSigner{CallbackURL: callbackURL, KeyID: kid, Secret: secret}, nil
}

// bidAndWin bids with campaign 42: its nurl, burl and pixel, each signed
// for its own event, with the bid request and imp ids as the event id;
// then fires the nurl as the exchange does when the bid wins (appending
// its macros after sig, unsigned and never counted).
func bidAndWin(out io.Writer, signer client.NoticeSigner, ids client.Identities) error {
	n, err := signer.URLs("42", ids, "req-"+rand.Text()[:8], "imp-1")
	if err != nil {
		return err
	}
	resp, err := http.Get(n.Win + "&price=1.23")
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Fprintf(out, "win notice: %d\n", resp.StatusCode)
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("callback answered the win notice %d", resp.StatusCode)
	}
	return nil
}
