package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/bench/internal/rig"
	"github.com/freqcap/freqcap/client"
)

// notices counts a notice's whole Redis work, from callback's /win to
// counted: a counter and a callback, built here as the Dockerfiles build
// them, run against the redis-server under callgrind, and n win notices
// (each on its own device, all on one tagid, as the bench's end to end
// sends them) go to /win from 16 clients. The journal's append, read,
// acknowledgement and trims, the counter's runs and both services'
// background work (the journal's samples every 100 ms, the forwarders'
// blocking reads) are in the figure, which therefore moves a little with
// how long the run takes. signed: the notices are signed (callback checks
// them and keeps each one's fingerprint until its URL expires, in the
// same script run as its append), as in production. format is callback's
// CALLBACK_JOURNAL_FORMAT.
type notices struct {
	bin, redisAddr string
	signed         bool
	format         int
	counterURL     string
	callbackURL    string
	adminURL       string
	procs          []*exec.Cmd
}

const signingSecret = "freqcap-instructions-signing-key"

// httpClient keeps a connection per sender.
var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

func (e *notices) start(ctx context.Context) error {
	addrs, err := rig.FreeAddrs(4)
	if err != nil {
		return err
	}
	redisURL := "REDIS_URL=redis://" + e.redisAddr
	e.counterURL, e.callbackURL, e.adminURL = "http://"+addrs[0], "http://"+addrs[2], "http://"+addrs[3]
	if err := e.spawn("counter", "COUNTER_ADDR="+addrs[0], "COUNTER_OPS_ADDR="+addrs[1], redisURL); err != nil {
		return err
	}
	env := []string{"CALLBACK_ADDR=" + addrs[2], "CALLBACK_ADMIN_ADDR=" + addrs[3], "COUNTER_URL=" + e.counterURL, redisURL,
		// Redis under callgrind answers about fifty times slower.
		"CALLBACK_APPEND_TIMEOUT=10s", "CALLBACK_FORWARD_TIMEOUT=30s", "CALLBACK_JOURNAL_FORMAT=" + strconv.Itoa(e.format)}
	if e.signed {
		env = append(env, "CALLBACK_SIGNING_KEYS=k1:"+base64.StdEncoding.EncodeToString([]byte(signingSecret)))
	}
	if err := e.spawn("callback", env...); err != nil {
		return err
	}
	for _, u := range []string{e.counterURL + "/healthz", e.adminURL + "/healthz"} {
		if err := rig.WaitHTTP(ctx, u); err != nil {
			return err
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, e.adminURL+"/v1/campaigns/42", strings.NewReader(`{"winLimitHours":3}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PUT /v1/campaigns/42: %s", resp.Status)
	}
	return nil
}

func (e *notices) spawn(name string, env ...string) error {
	cmd := exec.Command(filepath.Join(e.bin, name))
	cmd.Env = append(os.Environ(), append(env, "LOG_FORMAT=json", "LOG_LEVEL=warn")...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	e.procs = append(e.procs, cmd)
	return nil
}

// measure counts the instructions per notice of n notices (the k-th
// operation's devices), after a warm-up of 50, less the services'
// background work (the journal's samples every 100 ms, ...) for as long
// as they took: it is measured after them, with the services idle for
// 3 s, and answered per second.
func (e *notices) measure(ctx context.Context, rdb rueidis.Client, k, n int, dir string, pid int) (per, background int64, err error) {
	defer e.stop()
	if err := e.start(ctx); err != nil {
		return 0, 0, err
	}
	base := k * 1_000_000
	if err := e.send(ctx, rdb, base+900_000, 50); err != nil {
		return 0, 0, err
	}
	before, err := dump(dir, pid)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := e.send(ctx, rdb, base+1000, n); err != nil {
		return 0, 0, err
	}
	after, err := dump(dir, pid)
	if err != nil {
		return 0, 0, err
	}
	took := time.Since(start)
	const rest = 3 * time.Second
	time.Sleep(rest)
	idle, err := dump(dir, pid)
	if err != nil {
		return 0, 0, err
	}
	background = int64(float64(idle-after) / rest.Seconds())
	return (after - before - int64(float64(background)*took.Seconds())) / int64(n), background, nil
}

func (e *notices) stop() {
	for _, p := range e.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	e.procs = nil
}

// send sends wins i0..i0+n to /win, 16 at a time, and waits until the
// counter has counted all of them on the shared tagid (read by one GET
// at the end, so the waiting adds no Redis work).
func (e *notices) send(ctx context.Context, rdb rueidis.Client, i0, n int) error {
	key := "freq:{win:tagid:42:e2e}"
	before, err := counted(ctx, rdb, key)
	if err != nil {
		return err
	}
	signer := client.NoticeSigner{CallbackURL: e.callbackURL, KeyID: "k1", Secret: []byte(signingSecret)}
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := e.win(ctx, signer, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(next)
		for i := i0; i < i0+n; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	// Every notice was answered 204: wait for the journal to empty.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if v, err := rig.Metric(e.adminURL+"/metrics", "freqcap_callback_journal_undelivered"); err == nil && v == 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the journal did not empty within 5 minutes")
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		after, err := counted(ctx, rdb, key)
		if err != nil {
			return err
		}
		if after-before == int64(n) {
			return nil
		}
		if after-before > int64(n) || time.Now().After(deadline) {
			return fmt.Errorf("sent %d notices, counted %d", n, after-before)
		}
	}
}

func (e *notices) win(ctx context.Context, signer client.NoticeSigner, i int) error {
	ids := client.Identities{"device": device(i), "tagid": "e2e"}
	u := e.callbackURL + "/win?cid=42&device=" + device(i) + "&tagid=e2e&eid=n-" + strconv.Itoa(i)
	if e.signed {
		urls, err := signer.URLs("42", ids, "n-"+strconv.Itoa(i), "1")
		if err != nil {
			return err
		}
		u = urls.Win
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := httpClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("GET /win: %s", resp.Status)
	}
	return nil
}

func counted(ctx context.Context, rdb rueidis.Client, key string) (int64, error) {
	v, err := rdb.Do(ctx, rdb.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	return v, err
}
