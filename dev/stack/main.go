// Command stack runs freqcap on a developer's machine: redis-server, then
// the services built into bin/, with curl lines to try. It is a
// development tool only. It runs the real redis-server (make run installs
// it when it is missing), never an emulation: the services need Redis 7's
// scripts, client tracking and memory checks, which no embedded stand-in
// has.
//
// It checks that every port it needs is free before it starts anything,
// that what answers on each is its own child, and stops everything (exit
// status 1) when a child exits on its own. The addresses are the services'
// own variables: COUNTER_ADDR, COUNTER_OPS_ADDR, CALLBACK_ADDR, CALLBACK_ADMIN_ADDR, and
// REDIS_URL for a Redis it does not start (STACK_REDIS_ADDR for the one it
// does).
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/freqcap/freqcap/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// addrs are where the stack's processes listen.
type addrs struct {
	redis, counter, counterOps, callback, admin string
}

func loadAddrs(getenv func(string) string) addrs {
	or := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	return addrs{
		redis:      or("STACK_REDIS_ADDR", "127.0.0.1:6379"),
		counter:    or("COUNTER_ADDR", "127.0.0.1:8081"),
		counterOps: or("COUNTER_OPS_ADDR", "127.0.0.1:9081"),
		callback:   or("CALLBACK_ADDR", "127.0.0.1:8080"),
		admin:      or("CALLBACK_ADMIN_ADDR", "127.0.0.1:9080"),
	}
}

// The development signing key of make run. Never use it anywhere else.
const (
	devKeyID  = "dev"
	devSecret = "freqcap-dev-signing-key"
)

// child is one process the stack started; exited is closed when it ends.
type child struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it ended, once exited is closed
}

func start(name string, cmd *exec.Cmd) (*child, error) {
	// A process group of its own: Ctrl-C reaches the stack only, which then
	// stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// stop asks the child to end and waits for it.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *child) exitErr() error {
	if c.err == nil {
		return fmt.Errorf("%s exited (status 0) while the stack was running", c.name)
	}
	return fmt.Errorf("%s exited: %w (its log is above)", c.name, c.err)
}

func run(ctx context.Context, out io.Writer, getenv func(string) string) error {
	a := loadAddrs(getenv)
	redisURL := getenv("REDIS_URL")
	release, err := claimPIDFile(pidFile)
	if err != nil {
		return err
	}
	defer release()
	fmt.Fprintf(out, "freqcap stack pid %d: Ctrl-C here, or kill -INT %d from elsewhere, stops it\n", os.Getpid(), os.Getpid())
	if err := checkPorts(a, redisURL == ""); err != nil {
		return err
	}

	var children []*child
	defer func() {
		// Last started, first stopped: callback finishes its deliveries
		// to a counter that is still up, and Redis stops last.
		for _, c := range slices.Backward(children) {
			c.stop()
		}
	}()
	if redisURL == "" {
		u, c, err := startRedis(ctx, out, a.redis)
		if err != nil {
			return err
		}
		children = append(children, c)
		redisURL = u
	} else {
		fmt.Fprintf(out, "using the Redis at REDIS_URL=%s\n", redisURL)
	}

	for _, s := range services(a, redisURL) {
		cmd := exec.Command(filepath.Join("bin", s.name))
		cmd.Env = append(os.Environ(), s.env...)
		cmd.Stdout, cmd.Stderr = out, out
		c, err := start(s.name, cmd)
		if err != nil {
			return fmt.Errorf("%w (run make build first)", err)
		}
		children = append(children, c)
		if err := waitHealthy(ctx, c, s.health); err != nil {
			return err
		}
	}
	printTry(out, a)

	return waitForEnd(ctx, out, children)
}

// waitForEnd waits until Ctrl-C (nil), or until a child ends on its own
// (why it did).
func waitForEnd(ctx context.Context, out io.Writer, children []*child) error {
	exited := make(chan *child, len(children))
	for _, c := range children {
		go func() {
			<-c.exited
			exited <- c
		}()
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "stopping freqcap")
		return nil
	case c := <-exited:
		return c.exitErr()
	}
}

// checkPorts checks every port first, Redis's too when the stack starts
// one: nothing is started, and nothing written into somebody else's Redis,
// when one is taken.
func checkPorts(a addrs, ownRedis bool) error {
	ports := [][2]string{{a.counter, "COUNTER_ADDR"}, {a.counterOps, "COUNTER_OPS_ADDR"}, {a.callback, "CALLBACK_ADDR"}, {a.admin, "CALLBACK_ADMIN_ADDR"}}
	if ownRedis {
		ports = append([][2]string{{a.redis, "STACK_REDIS_ADDR"}}, ports...)
	}
	for _, p := range ports {
		if err := free(p[0]); err != nil {
			hint := "set " + p[1] + " to a free address"
			if p[1] == "STACK_REDIS_ADDR" {
				hint = "set REDIS_URL to use the Redis there, or STACK_REDIS_ADDR to start one elsewhere"
			}
			return fmt.Errorf("%s %s is taken (%v): stop what listens there, or %s", p[1], p[0], err, hint)
		}
	}
	return nil
}

// service is one service the stack runs: its binary's name, its health
// URL and its environment.
type service struct {
	name, health string
	env          []string
}

// services are the counter and callback, on a's addresses and the Redis
// at redisURL.
func services(a addrs, redisURL string) []service {
	return []service{
		{"counter", "http://" + a.counter + "/healthz", []string{"COUNTER_ADDR=" + a.counter, "COUNTER_OPS_ADDR=" + a.counterOps, "REDIS_URL=" + redisURL, "COUNTER_LIMITS_FILE=dev/limits.yaml"}},
		{"callback", "http://" + a.admin + "/healthz", []string{
			"CALLBACK_ADDR=" + a.callback, "CALLBACK_ADMIN_ADDR=" + a.admin, "COUNTER_URL=http://" + a.counter,
			"REDIS_URL=" + redisURL, "CALLBACK_CAMPAIGNS_FILE=dev/campaigns.json",
			// A development key, public in this file: notices are signed as in
			// production; api.http's notices are signed with it to 2100.
			"CALLBACK_SIGNING_KEYS=" + devKeyID + ":" + base64.StdEncoding.EncodeToString([]byte(devSecret)),
			"CALLBACK_MAX_NOTICE_AGE=876000h"}},
	}
}

// pidFile holds the pid of the stack running from this directory.
const pidFile = "bin/stack.pid"

// claimPIDFile writes this process's pid to path, unless the stack whose
// pid is there is still running: then it says so (a second make run
// would otherwise find its ports taken and be sent looking elsewhere).
// release removes the file.
func claimPIDFile(path string) (release func(), err error) {
	if b, err := os.ReadFile(path); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid != os.Getpid() && alive(pid) {
			return nil, fmt.Errorf("another freqcap stack is running from this directory (pid %d): stop it with Ctrl-C in its terminal, or kill -INT %d", pid, pid)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}

// alive reports whether pid is a running stack (not a zombie, nor a
// process that took the pid of one that died without removing its file).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc (macOS): the signal test is all there is
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && strings.Contains(string(cmdline), "stack")
}

// free reports whether nothing listens on addr.
func free(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return l.Close()
}

// startRedis starts redis-server from PATH on addr and checks that the
// Redis answering there is that process.
func startRedis(ctx context.Context, out io.Writer, addr string) (url string, c *child, err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("redis-server is not on PATH: make run installs it with apt-get on Debian and Ubuntu; " +
			"elsewhere install Redis 7 (brew install redis), or set REDIS_URL to a Redis 7 of yours")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("STACK_REDIS_ADDR %q: %w", addr, err)
	}
	dir, err := os.MkdirTemp("", "freqcap-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", port, "--bind", host, "--dir", dir, "--save", "", "--appendonly", "no")
	c, err = start("redis-server", cmd)
	if err != nil {
		return "", nil, err
	}
	go func() {
		<-c.exited
		_ = os.RemoveAll(dir)
	}()
	if err := waitOwnRedis(ctx, c, addr); err != nil {
		c.stop()
		return "", nil, err
	}
	fmt.Fprintf(out, "redis-server %s on %s (pid %d, data in %s, not persisted)\n", bin, addr, cmd.Process.Pid, dir)
	return "redis://" + addr, c, nil
}

// waitOwnRedis waits until the Redis on addr answers with c's pid.
func waitOwnRedis(ctx context.Context, c *child, addr string) error {
	var last error
	for range 100 {
		pid, err := redisPID(addr)
		switch {
		case err == nil && pid == c.cmd.Process.Pid:
			return nil
		case err == nil:
			return fmt.Errorf("the Redis on %s is process %d, not the redis-server the stack started (%d)", addr, pid, c.cmd.Process.Pid)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.exited:
			return c.exitErr()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("redis-server not answering on %s after 5s: %v", addr, last)
}

// redisPID asks the Redis on addr for its process_id (INFO server).
func redisPID(addr string) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO answered %q", strings.TrimSpace(head))
	}
	n, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return 0, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(body), "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server has no process_id")
}

// waitHealthy waits until url answers 200 while c is running: a child
// that fails to start (its port taken after the check, a bad setting)
// ends the wait at once.
func waitHealthy(ctx context.Context, c *child, url string) error {
	client := &http.Client{Timeout: time.Second}
	for range 200 {
		select {
		case <-c.exited:
			return c.exitErr()
		default:
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				select {
				case <-c.exited:
					return c.exitErr()
				default:
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.exited:
			return c.exitErr()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not healthy at %s after 10s", c.name, url)
}

func printTry(out io.Writer, a addrs) {
	signer := client.NoticeSigner{CallbackURL: "http://" + a.callback, KeyID: devKeyID, Secret: []byte(devSecret)}
	n, err := signer.URLs("42", client.Identities{"device": "abc", "bundle": "com.foo", "tagid": "7"}, "auction-1", "imp-1")
	if err != nil {
		panic(err) // the arguments above are constants
	}
	r := strings.NewReplacer("{callback}", a.callback, "{admin}", a.admin, "{counter}", a.counter, "{ops}", a.counterOps, "{signedWin}", n.Win+"&price=0.42")
	fmt.Fprint(out, r.Replace(`
freqcap is up: callback on {callback} (admin {admin}), counter on {counter} (metrics, pprof on {ops});
campaigns from dev/campaigns.json
(42: winLimitHours 3, 43: 24, 44: 0). Try:

  # an exchange's win notice (nurl), signed with the development key "dev" (valid for an hour; the
  # exchange's price after sig is not signed), then the bidder's read
  curl -si '{signedWin}'
  # a notice nobody signed: 403, not counted
  curl -si 'http://{callback}/win?cid=42&device=abc&eid=forged-1'
  curl -s 'http://{counter}/v1/freq?cid=42&device=abc&bundle=com.foo&tagid=7&windowHours=3'
  curl -s -XPOST http://{counter}/v1/freq/batch -H 'Content-Type: application/json' -d '{"items":[{"cid":"42","dims":{"device":"abc","bundle":"com.foo"},"windowHours":[3]},{"cid":"43","dims":{"device":"abc"},"windowHours":[24]}]}'

  # campaigns, and counting straight on the counter
  curl -s -XPUT http://{admin}/v1/campaigns/45 -H 'Content-Type: application/json' -d '{"winLimitHours":2}'
  curl -s -XPOST 'http://{counter}/v1/incr?cid=45&device=abc&windowHours=2&eid=try-1'
  curl -s http://{admin}/metrics | grep freqcap_callback_

  # the generic frequency-control API, Connect JSON
  curl -s -H 'Content-Type: application/json' -d '{"business_id":7,"key":"user:1","time_span":60,"time_unit":"TIME_UNIT_SEC"}' http://{counter}/freqcap.v1.FrequencyControl/AddFreq

  # rate limiting: inline, and a named policy of dev/limits.yaml through the gate
  curl -si -XPOST http://{counter}/v1/limit -H 'Content-Type: application/json' -d '{"key":"user:1","algorithm":"fixed_window","limit":3,"period":"1m","cost":1}'
  curl -si 'http://{counter}/v1/limit/gate?policy=login&key=alice'

Ctrl-C stops everything.
`))
}
