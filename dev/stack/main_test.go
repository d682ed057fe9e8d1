package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/proctest"
	"github.com/freqcap/freqcap/shared/redistest"
)

// stackDir is a directory laid out as the repository is for make run:
// bin/ with the services and the launcher, dev/ with its sample files.
func stackDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := proctest.Build(filepath.Join(dir, "bin"), "./counter", "./callback", "./dev/stack"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"campaigns.json", "limits.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dev", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// launch runs the stack as make run does, on free ports, and returns it
// with its output as it comes.
type launched struct {
	cmd  *exec.Cmd
	a    addrs
	mu   sync.Mutex
	out  strings.Builder
	done chan error
}

func (l *launched) logs() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out.String()
}

func launch(t *testing.T, dir string, env ...string) *launched {
	t.Helper()
	port := func() string { return fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) }
	l := &launched{a: addrs{redis: port(), counter: port(), counterOps: port(), callback: port(), admin: port()}, done: make(chan error, 1)}
	l.cmd = exec.Command(filepath.Join(dir, "bin", "stack"))
	l.cmd.Dir = dir
	l.cmd.Env = append(os.Environ(), append([]string{"STACK_REDIS_ADDR=" + l.a.redis, "COUNTER_ADDR=" + l.a.counter, "COUNTER_OPS_ADDR=" + l.a.counterOps,
		"CALLBACK_ADDR=" + l.a.callback, "CALLBACK_ADMIN_ADDR=" + l.a.admin, "REDIS_URL="}, env...)...)
	pr, pw := io.Pipe()
	l.cmd.Stdout, l.cmd.Stderr = pw, pw
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			l.mu.Lock()
			l.out.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
		}
	}()
	go func() {
		err := l.cmd.Wait()
		pw.Close()
		// Every line the stack wrote is in out before its exit is told.
		<-scanned
		l.done <- err
	}()
	t.Cleanup(func() {
		if l.cmd.ProcessState == nil {
			_ = l.cmd.Process.Signal(syscall.SIGTERM)
			<-l.done
		}
		if t.Failed() {
			t.Logf("stack output:\n%s", l.logs())
		}
	})
	return l
}

// wait waits for the stack to exit and returns its exit status.
func (l *launched) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-l.done:
		return l.cmd.ProcessState.ExitCode()
	case <-time.After(60 * time.Second):
		t.Fatal("stack did not exit within 60s")
		return 0
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Without redis-server on PATH (and no REDIS_URL) the stack stops at once
// and says what to install: it never falls back to an emulation whose
// scripts fail (an embedded miniredis could not run count.lua) while
// notices are answered 204.
func TestStackNeedsARealRedis(t *testing.T) {
	dir := stackDir(t)
	l := launch(t, dir, "PATH="+t.TempDir())
	if code := l.wait(t); code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
	if !strings.Contains(l.logs(), "redis-server is not on PATH") || strings.Contains(l.logs(), "freqcap is up") {
		t.Errorf("output:\n%s\nwant it to say redis-server is not on PATH, and start nothing", l.logs())
	}
}

// make run starts Redis, counter and callback on the addresses it is
// given, counts a notice, and Ctrl-C stops it cleanly (status 0).
func TestStackRunsCountsAndStopsCleanly(t *testing.T) {
	dir := stackDir(t)
	// The docs' answers, not the read deadline, are under test: reads get
	// a second rather than 5 ms, which the other packages' tests running
	// beside this one can make the counter miss (an answer then fails
	// open, degraded, as it should).
	l := launch(t, dir, "COUNTER_READ_TIMEOUT=1s")
	waitFor(t, "freqcap is up", func() bool { return strings.Contains(l.logs(), "freqcap is up") })
	for _, want := range []string{"callback on " + l.a.callback, "counter on " + l.a.counter, "redis-server", "on " + l.a.redis, "http://" + l.a.callback + "/win?"} {
		if !strings.Contains(l.logs(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// A second make run from the same directory names the first.
	second := launch(t, dir)
	if code := second.wait(t); code != 1 || !strings.Contains(second.logs(), fmt.Sprintf("another freqcap stack is running from this directory (pid %d)", l.cmd.Process.Pid)) {
		t.Errorf("a second stack: status %d, output %q", code, second.logs())
	}
	// make run signs notices with its development key: a signed one counts,
	// an unsigned one is refused.
	signer := client.NoticeSigner{CallbackURL: "http://" + l.a.callback, KeyID: devKeyID, Secret: []byte(devSecret)}
	n, err := signer.URLs("42", client.Identities{"device": "stack-test"}, "s", "1")
	if err != nil {
		t.Fatal(err)
	}
	for u, want := range map[string]int{n.Win: http.StatusNoContent, "http://" + l.a.callback + "/win?cid=42&device=stack-test&eid=s-2": http.StatusForbidden} {
		resp, err := http.Get(u)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("notice %s: %v %v, want %d", u, resp, err, want)
		}
		resp.Body.Close()
	}
	waitFor(t, "the notice counted", func() bool {
		resp, err := http.Get("http://" + l.a.counter + "/v1/freq?cid=42&device=stack-test")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"day":1`)
	})
	t.Run("api.http top to bottom", func(t *testing.T) { runAPIHTTP(t, l.a) })
	t.Run("the curl lines of README and docs", func(t *testing.T) { runDocsCurl(t, l.a) })
	_ = l.cmd.Process.Signal(syscall.SIGINT)
	if code := l.wait(t); code != 0 {
		t.Fatalf("stack exited %d after SIGINT, want 0", code)
	}
	for _, addr := range []string{l.a.redis, l.a.counter, l.a.counterOps, l.a.callback, l.a.admin} {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			t.Errorf("%s still listening after the stack stopped", addr)
		}
	}
}

// A taken port stops the stack before it starts anything, naming the
// variable; a service that exits at start stops the stack with status 1.
func TestStackRefusesTakenPortsAndFailsWithItsChildren(t *testing.T) {
	dir := stackDir(t)

	// Someone else's Redis on the stack's port: nothing is written into it.
	other := redistest.Start(t)
	l := launch(t, dir, "STACK_REDIS_ADDR="+other.Addr)
	if code := l.wait(t); code != 1 || !strings.Contains(l.logs(), "STACK_REDIS_ADDR "+other.Addr+" is taken") {
		t.Fatalf("with port %s taken: status %d, output %q", other.Addr, code, l.logs())
	}
	if strings.Contains(l.logs(), "freqcap is up") {
		t.Error("said freqcap is up")
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	l = launch(t, dir, "COUNTER_ADDR="+taken.Addr().String())
	if code := l.wait(t); code != 1 || !strings.Contains(l.logs(), "COUNTER_ADDR "+taken.Addr().String()+" is taken") {
		t.Fatalf("with COUNTER_ADDR taken: status %d, output %q", code, l.logs())
	}
	if c, err := net.Dial("tcp", l.a.redis); err == nil {
		c.Close()
		t.Error("a redis-server was started although a port was taken")
	}

	// A counter that refuses its settings exits at once.
	l = launch(t, dir, "COUNTER_READ_TIMEOUT=soon")
	if code := l.wait(t); code != 1 || !strings.Contains(l.logs(), "counter exited") || strings.Contains(l.logs(), "freqcap is up") {
		t.Fatalf("with a counter that cannot start: status %d, output %q", code, l.logs())
	}
	waitFor(t, "redis-server stopped", func() bool {
		c, err := net.Dial("tcp", l.a.redis)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// apiRequest is one request of api.http.
type apiRequest struct {
	title, method, url, body string
	header                   http.Header
}

// parseAPIHTTP reads api.http: blocks that start with "### title", then
// "METHOD URL", header lines, a blank line and the body.
func parseAPIHTTP(t *testing.T, path string, vars map[string]string) []apiRequest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []apiRequest
	for _, block := range strings.Split(string(b), "\n### ")[1:] {
		lines := strings.Split(block, "\n")
		r := apiRequest{title: lines[0], header: http.Header{}}
		i := 1
		for ; i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == ""); i++ {
		}
		if i == len(lines) {
			t.Fatalf("api.http: %q has no request", r.title)
		}
		method, url, ok := strings.Cut(lines[i], " ")
		if !ok {
			t.Fatalf("api.http: %q: request line %q", r.title, lines[i])
		}
		for name, v := range vars {
			url = strings.ReplaceAll(url, "{{"+name+"}}", v)
		}
		r.method, r.url = method, url
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
			k, v, _ := strings.Cut(lines[i], ":")
			r.header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		r.body = strings.TrimSpace(strings.Join(lines[min(i, len(lines)):], "\n"))
		out = append(out, r)
	}
	return out
}

// refusedWith finds the status a title promises for a refusal: "is
// refused with 403", "answers 400", "is a 400", "INVALID_ARGUMENT (400)".
var refusedWith = regexp.MustCompile(`(?:(?:with|answers|is a) |\()(40[034])\b`)

// promised finds what a title says an answer holds: "name": value.
var promised = regexp.MustCompile(`"(\w+)": (true|false|-?\d+)`)

// runAPIHTTP sends every request of api.http in order, as a newcomer
// running it top to bottom would, and checks that what each title says
// is what happens.
func runAPIHTTP(t *testing.T, a addrs) {
	vars := map[string]string{"counter": "http://" + a.counter, "counterOps": "http://" + a.counterOps, "callback": "http://" + a.callback, "admin": "http://" + a.admin}
	reqs := parseAPIHTTP(t, filepath.Join("..", "..", "api.http"), vars)
	if len(reqs) < 40 {
		t.Fatalf("api.http: only %d requests parsed", len(reqs))
	}
	// A redirect (a click tracker's 302) is the answer: never followed.
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, r := range reqs {
		if strings.Contains(r.url, "/debug/pprof/profile") {
			continue // 30 s of CPU profile
		}
		req, err := http.NewRequest(r.method, r.url, strings.NewReader(r.body))
		if err != nil {
			t.Fatalf("%s: %v", r.title, err)
		}
		req.Header = r.header
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", r.title, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		want := 0
		if m := refusedWith.FindStringSubmatch(r.title); m != nil {
			want, _ = strconv.Atoi(m[1])
		}
		switch {
		case resp.StatusCode >= 500:
			t.Errorf("%s: %d %.300s", r.title, resp.StatusCode, body)
		case want != 0 && resp.StatusCode != want:
			t.Errorf("%s: %d, want %d: %.300s", r.title, resp.StatusCode, want, body)
		case want == 0 && resp.StatusCode >= 400 && resp.StatusCode != 429:
			t.Errorf("%s: %d: %.300s", r.title, resp.StatusCode, body)
		}
		dup := strings.Contains(body, `"duplicate":true`)
		if strings.Contains(r.title, `"duplicate": true`) != dup && strings.HasPrefix(r.url, vars["counter"]+"/v1/incr?") {
			t.Errorf("%s: duplicate %v: %.300s", r.title, dup, body)
		}
		// What a title promises of the answer ("shadowed": true), the answer holds.
		for _, m := range promised.FindAllStringSubmatch(r.title, -1) {
			if want := `"` + m[1] + `":` + m[2]; !strings.Contains(body, want) {
				t.Errorf("%s: the answer lacks %s: %.300s", r.title, want, body)
			}
		}
	}
}

// shBlock is a fenced shell block of a Markdown file.
var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// statusComment is what a curl line's comment says it answers: "# 204",
// "# 204 or 429", "# 403: not signed".
var statusComment = regexp.MustCompile(`^#\s*([1-5]\d\d(?:\s*(?:or|,|/)\s*[1-5]\d\d)*)\b`)

// docsCurl is one curl command of the docs: where it is, the command, and
// the statuses its comment promises (none: any below 400).
type docsCurl struct {
	at, cmd string
	want    []string
}

// curlCommands reads the curl commands of README.md and docs/*.md: a
// command runs over several lines while a quote is open or a line ends
// with a backslash, and its comment follows it on its last line.
func curlCommands(t *testing.T) []docsCurl {
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"))
	var out []docsCurl
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range shBlock.FindAllStringSubmatch(string(b), -1) {
			var cmd []string
			quoted := false
			for _, line := range strings.Split(m[1], "\n") {
				if len(cmd) == 0 && !strings.HasPrefix(strings.TrimSpace(line), "curl ") {
					continue
				}
				code, comment := line, ""
				for i := 0; i < len(line); i++ {
					switch {
					case line[i] == '\'':
						quoted = !quoted
					case !quoted && line[i] == '#' && i > 0 && line[i-1] == ' ':
						code, comment = line[:i], strings.TrimSpace(line[i:])
						i = len(line)
					}
				}
				cmd = append(cmd, code)
				if quoted || strings.HasSuffix(strings.TrimSpace(code), "\\") {
					continue
				}
				c := docsCurl{at: filepath.Base(f) + ": " + strings.TrimSpace(cmd[0]), cmd: strings.Join(cmd, "\n")}
				if sm := statusComment.FindStringSubmatch(comment); sm != nil {
					c.want = regexp.MustCompile(`\d{3}`).FindAllString(sm[1], -1)
				}
				out = append(out, c)
				cmd = nil
			}
		}
	}
	return out
}

// runDocsCurl runs every curl command of README and docs against the
// stack (its addresses in place of the defaults) and checks the status:
// the one its comment names, else one below 400.
func runDocsCurl(t *testing.T, a addrs) {
	cmds := curlCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("found %d curl commands in README and docs: the pattern is wrong", len(cmds))
	}
	swap := strings.NewReplacer("127.0.0.1:8081", a.counter, "127.0.0.1:8080", a.callback, "127.0.0.1:9080", a.admin, "127.0.0.1:9081", a.counterOps)
	for _, c := range cmds {
		// curl prints the status last; -s and -i as the line says.
		script := `curl() { command curl --max-time 10 -w '\nstatus=%{http_code}\n' "$@"; }` + "\n" + swap.Replace(c.cmd)
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", c.at, err, out)
			continue
		}
		i := strings.LastIndex(string(out), "status=")
		if i < 0 {
			t.Errorf("%s: no status in %q", c.at, out)
			continue
		}
		status := strings.TrimSpace(string(out[i+len("status="):]))
		switch {
		case len(c.want) > 0 && !slices.Contains(c.want, status):
			t.Errorf("%s: %s, its comment says %v: %.300s", c.at, status, c.want, out)
		case len(c.want) == 0 && status >= "400":
			t.Errorf("%s: %s: %.300s", c.at, status, out)
		}
	}
}
