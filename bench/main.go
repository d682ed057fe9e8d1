// Command bench is make bench: it builds the release binaries, starts its own
// redis-server, counter, callback and a bare net/http baseline on loopback,
// fills Redis with device counters, runs every scenario against the
// baseline in alternation, and writes the medians to bench/RESULTS.md.
//
// Throughput comes from wrk (Debian's package), constant-rate latency from
// vegeta as a library. Every figure that is compared is a ratio measured in
// the same round, because absolute numbers drift on a shared machine.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/freqcap/freqcap/bench/internal/rig"
	"github.com/freqcap/freqcap/core"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// settings, from the environment; the defaults are the documented run.
type settings struct {
	duration time.Duration // per scenario run
	rounds   int
	fill     int
	rate     int // constant-rate latency runs, req/s
	out      string
	results  string
	only     []string // scenario names to run; all when empty
	// journalOwn runs callback's journal in a redis-server of its own
	// (BENCH_JOURNAL_REDIS=own: CALLBACK_JOURNAL_REDIS_URL).
	journalOwn bool
}

func (s settings) wants(name string) bool { return len(s.only) == 0 || slices.Contains(s.only, name) }

func loadSettings() (settings, error) {
	s := settings{duration: 10 * time.Second, rounds: 3, fill: 1_000_000, rate: 5000, out: "bench/out", results: "bench/RESULTS.md"}
	var err error
	if v := os.Getenv("BENCH_DURATION"); v != "" {
		if s.duration, err = time.ParseDuration(v); err != nil {
			return s, fmt.Errorf("BENCH_DURATION: %w", err)
		}
	}
	for name, dst := range map[string]*int{"BENCH_ROUNDS": &s.rounds, "BENCH_FILL": &s.fill, "BENCH_RATE": &s.rate} {
		if v := os.Getenv(name); v != "" {
			if *dst, err = strconv.Atoi(v); err != nil || *dst < 1 {
				return s, fmt.Errorf("%s: want a positive whole number, got %q", name, v)
			}
		}
	}
	if v := os.Getenv("BENCH_ONLY"); v != "" {
		s.only = strings.Split(v, ",")
	}
	if v := os.Getenv("BENCH_RESULTS"); v != "" {
		s.results = v
	}
	switch v := os.Getenv("BENCH_JOURNAL_REDIS"); v {
	case "", "shared":
	case "own":
		s.journalOwn = true
	default:
		return s, fmt.Errorf("BENCH_JOURNAL_REDIS: shared (the default) or own, got %q", v)
	}
	return s, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// proc is one process of the bench, with its CPU time read from /proc.
type proc struct {
	name string
	cmd  *exec.Cmd
}

func (p *proc) cpuTicks() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

type stack struct {
	s                                            settings
	redis, counter, counter5, callback, baseline *proc
	redisAddr, counterURL, callbackURL, baseURL  string
	counterOpsURL                                string // metrics and pprof
	counter5URL                                  string // the counter with the production 5 ms read deadline
	adminURL                                     string
	procs                                        []*proc
	logs                                         *os.File
}

func run(ctx context.Context) error {
	s, err := loadSettings()
	if err != nil {
		return err
	}
	for _, tool := range []string{"wrk", "redis-server", "redis-cli", "redis-benchmark"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: apt-get install -y wrk redis-server redis-tools", tool)
		}
	}
	if err := os.MkdirAll(filepath.Join(s.out, "profiles"), 0o755); err != nil {
		return err
	}
	st := &stack{s: s}
	defer st.stopAll()
	if err := st.start(ctx); err != nil {
		return err
	}
	began := time.Now()
	defer func() { fmt.Printf("bench took %s\n", time.Since(began).Round(time.Second)) }()
	fmt.Printf("filling Redis with %d device counters...\n", s.fill)
	bytesPer, err := st.fillDevices(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("Redis bytes per device counter (day key + 3-field hour hash, UUID ids): %.0f (fill took %s)\n", bytesPer, time.Since(began).Round(time.Second))

	// Let the fill's garbage go and Redis settle before anything is timed.
	runtime.GC()
	debug.FreeOSMemory()
	time.Sleep(3 * time.Second)

	rep := &report{bytesPerCounter: bytesPer, settings: s}
	for round := 1; round <= s.rounds; round++ {
		if err := st.round(ctx, rep, round); err != nil {
			return err
		}
	}
	return rep.write()
}

// round runs one round of every scenario asked for: the latency runs
// first, on a quiet machine, before the write scenarios grow Redis; then
// the throughput scenarios, each right after a baseline run; then
// redis-benchmark of the write script.
func (st *stack) round(ctx context.Context, rep *report, round int) error {
	for _, name := range []string{"latency-baseline", "latency-hot", "latency-cold", "latency-win", "latency-freeze", "decide-50-http", "decide-50-direct", "decide-50-ids-http", "decide-50-ids-direct", "overshoot"} {
		if !st.s.wants(name) {
			continue
		}
		var res result
		var err error
		switch name {
		case "latency-freeze":
			res, err = st.freeze(ctx)
		case "decide-50-http", "decide-50-direct", "decide-50-ids-http", "decide-50-ids-direct":
			res, err = st.decide(ctx, name)
		case "overshoot":
			res, err = st.overshoot(ctx, round)
		default:
			res, err = st.constantRate(ctx, name, round)
		}
		if err != nil {
			return err
		}
		rep.add(name, res, result{})
		fmt.Printf("round %d %-12s at %.0f/s: p50 %s p99 %s p99.9 %s (%d errors) %s\n", round, name, res.rate, ms(res.p50), ms(res.p99), ms(res.p999), res.errors, res.note)
	}
	for _, sc := range scenarios(st) {
		if !st.s.wants(sc.name) {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		base, err := st.wrk(ctx, "baseline", st.baseURL+"/", "", round, false)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		res, err := sc.run(ctx, round)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		res.ratio = res.rate / base.rate
		rep.add(sc.name, res, base)
		fmt.Printf("round %d %-12s %10.0f %-6s ratio %.2f (baseline %.0f req/s)  p50 %s p99 %s  %s\n",
			round, sc.name, res.rate, sc.unit, res.ratio, base.rate, ms(res.p50), ms(res.p99), res.note)
	}
	if st.s.wants("redis-script") {
		res, err := st.redisBenchmark(ctx)
		if err != nil {
			return fmt.Errorf("redis-benchmark: %w", err)
		}
		rep.add("redis-script", res, result{})
		fmt.Printf("round %d redis-script %10.0f scripts/s (16 per round trip)\n", round, res.rate)
	}
	return nil
}

// readTimeout is the counter's read deadline during the bench.
const readTimeout = "100ms"

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

func (st *stack) start(ctx context.Context) error {
	bin := filepath.Join(st.s.out, "bin")
	// The same go build line as the Dockerfiles.
	if err := rig.Build(ctx, bin, "./counter", "./callback", "./bench/baseline"); err != nil {
		return err
	}
	logs, err := os.Create(filepath.Join(st.s.out, "services.log"))
	if err != nil {
		return err
	}
	st.logs = logs
	addrs, err := rig.FreeAddrs(9)
	if err != nil {
		return err
	}
	if st.redis, err = st.startRedis("redis", addrs[0]); err != nil {
		return err
	}
	st.redisAddr = addrs[0]
	redisURL := "REDIS_URL=redis://" + st.redisAddr
	st.counterURL, st.callbackURL, st.adminURL, st.baseURL = "http://"+addrs[1], "http://"+addrs[2], "http://"+addrs[3], "http://"+addrs[4]
	callbackEnv := []string{"CALLBACK_ADDR=" + addrs[2], "CALLBACK_ADMIN_ADDR=" + addrs[3], "COUNTER_URL=" + st.counterURL, redisURL,
		"LOG_FORMAT=json", "CALLBACK_JOURNAL_FORMAT=2"}
	if st.s.journalOwn {
		if _, err := st.startRedis("journal-redis", addrs[8]); err != nil {
			return err
		}
		callbackEnv = append(callbackEnv, "CALLBACK_JOURNAL_REDIS_URL=redis://"+addrs[8])
	}
	st.counterOpsURL = "http://" + addrs[5]
	if st.counter, err = st.spawn("counter", filepath.Join(bin, "counter"), []string{"COUNTER_ADDR=" + addrs[1], "COUNTER_OPS_ADDR=" + addrs[5], redisURL, "LOG_FORMAT=json",
		// wrk's closed loop saturates the machine and queues requests far past
		// the production 5 ms read deadline; throughput must count full
		// reads, not cheap degraded ones. The constant-rate runs show latency.
		"COUNTER_READ_TIMEOUT=" + readTimeout}); err != nil {
		return err
	}
	// A second counter with the production read deadline, for the run that
	// freezes Redis: its answers must come within 5 ms + 2 ms.
	st.counter5URL = "http://" + addrs[6]
	if st.counter5, err = st.spawn("counter-5ms", filepath.Join(bin, "counter"), []string{"COUNTER_ADDR=" + addrs[6], "COUNTER_OPS_ADDR=" + addrs[7], redisURL, "LOG_FORMAT=json"}); err != nil {
		return err
	}
	// One version runs: journal entries of one field, as a deployment
	// whose callbacks all run this version sets.
	if st.callback, err = st.spawn("callback", filepath.Join(bin, "callback"), callbackEnv); err != nil {
		return err
	}
	if st.baseline, err = st.spawn("baseline", filepath.Join(bin, "baseline"), []string{"BASELINE_ADDR=" + addrs[4]}); err != nil {
		return err
	}
	for _, u := range []string{st.counterURL + "/healthz", st.counter5URL + "/healthz", st.adminURL + "/healthz", st.baseURL + "/"} {
		if err := rig.WaitHTTP(ctx, u); err != nil {
			return err
		}
	}
	req, _ := http.NewRequest(http.MethodPut, st.adminURL+"/v1/campaigns/42", strings.NewReader(`{"winLimitHours":3}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// startRedis starts a redis-server of the bench, named name, at addr, with
// no persistence, and waits until it takes connections.
func (st *stack) startRedis(name, addr string) (*proc, error) {
	host, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "freqcap-bench-")
	if err != nil {
		return nil, err
	}
	p, err := st.spawn(name, "redis-server", nil, "--bind", host, "--port", port, "--dir", dir,
		"--save", "", "--appendonly", "no")
	if err != nil {
		return nil, err
	}
	return p, waitTCP(addr)
}

func (st *stack) spawn(name, bin string, env []string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = st.logs, st.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd}
	st.procs = append(st.procs, p)
	return p, nil
}

func (st *stack) stopAll() {
	for _, p := range slices.Backward(st.procs) {
		p.stop()
	}
	if st.logs != nil {
		st.logs.Close()
	}
}

func waitTCP(addr string) error {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c.Close()
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("%s not listening", addr)
}

// deviceID is the UUID-shaped id of filled device i, as the wrk script makes it.
func deviceID(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }

// fillDevices writes s.fill device counters shaped as the write script
// leaves them (day String with TTL, hour Hash with 3 fields and TTL) through
// redis-cli --pipe, and returns the bytes Redis spent on each.
func (st *stack) fillDevices(ctx context.Context) (float64, error) {
	before, err := st.usedMemory()
	if err != nil {
		return 0, err
	}
	host, port, _ := net.SplitHostPort(st.redisAddr)
	cmd := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "--pipe")
	in, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	cmd.Stdout, cmd.Stderr = st.logs, st.logs
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	hour := time.Now().Unix() / 3600
	resp := func(args ...string) {
		fmt.Fprintf(w, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	for i := range st.s.fill {
		tag := "{win:device:42:" + deviceID(i) + "}"
		resp("SET", "freq:"+tag, "2", "PX", "86400000")
		resp("HSET", "hfreq:"+tag, strconv.FormatInt(hour-2, 10), "1", strconv.FormatInt(hour-1, 10), "1", strconv.FormatInt(hour, 10), "1")
		resp("PEXPIRE", "hfreq:"+tag, "14400000")
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		return 0, fmt.Errorf("redis-cli --pipe: %w", err)
	}
	after, err := st.usedMemory()
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(st.s.fill), nil
}

func (st *stack) usedMemory() (int64, error) {
	host, port, _ := net.SplitHostPort(st.redisAddr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "INFO", "memory").Output()
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`used_memory:(\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no used_memory in INFO")
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// result is one measured run.
type result struct {
	rate           float64 // req/s, items/s or scripts/s
	ratio          float64
	p50, p99, p999 time.Duration
	cpu            map[string]float64 // percent of one core, per process
	busy, steal    float64            // the machine's, percent of all its cores (wrk runs)
	errors         int
	note           string
}

type scenario struct {
	name, unit string
	run        func(ctx context.Context, round int) (result, error)
}

func scenarios(st *stack) []scenario {
	out := []scenario{
		{"hot-read", "req/s", func(ctx context.Context, round int) (result, error) {
			return st.wrk(ctx, "hot-read", st.counterURL+"/v1/freq?cid=42&bundle=com.hot&tagid=7&windowHours=3", "", round, true)
		}},
		{"cold-read", "req/s", func(ctx context.Context, round int) (result, error) {
			return st.wrk(ctx, "cold-read", st.counterURL, "cold", round, true)
		}},
		{"batch-50", "items/s", func(ctx context.Context, round int) (result, error) {
			r, err := st.wrk(ctx, "batch-50", st.counterURL, "batch", round, true)
			r.rate *= 50
			return r, err
		}},
		{"write", "req/s", func(ctx context.Context, round int) (result, error) {
			return st.wrk(ctx, "write", st.counterURL, "write", round, true)
		}},
		{"write-batch-20", "notices/s", func(ctx context.Context, round int) (result, error) {
			r, err := st.wrk(ctx, "write-batch-20", st.counterURL, "writebatch", round, true)
			r.rate *= 20
			return r, err
		}},
		{"end-to-end", "req/s", func(ctx context.Context, round int) (result, error) {
			return st.endToEnd(ctx, round)
		}},
		// The generic API over Connect JSON; the batch reads the keys the
		// AddFreq run wrote.
		{"addfreq", "req/s", func(ctx context.Context, round int) (result, error) {
			return st.wrk(ctx, "addfreq", st.counterURL, "addfreq", round, true)
		}},
		{"getfreq-batch-50", "items/s", func(ctx context.Context, round int) (result, error) {
			r, err := st.wrk(ctx, "getfreq-batch-50", st.counterURL, "getbatch", round, true)
			r.rate *= 50
			return r, err
		}},
		// The bidder's one question at full speed: what a decide costs the
		// counter and Redis, for sizing (decide-50-ids-http times it at a
		// constant rate).
		{"decide-50-ids-saturated", "decides/s", func(ctx context.Context, round int) (result, error) {
			if err := st.declare(ctx, decideCIDs()); err != nil {
				return result{}, err
			}
			r, err := st.wrk(ctx, "decide-50-ids-saturated", st.counterURL, "decide", round, true)
			if err == nil && r.rate > 0 {
				per := func(p string) float64 { return r.cpu[p] / 100 / r.rate * 1e6 }
				r.note = strings.TrimSpace(fmt.Sprintf("CPU a decide of 50 campaigns by id: the counter %.0f us, Redis %.0f us %s", per("counter"), per("redis"), r.note))
			}
			return r, err
		}},
	}
	// One rate-limit check per request, per algorithm, on random keys;
	// then the bytes of the keys the run left.
	for _, alg := range limitAlgorithms {
		name := "limit-" + alg
		out = append(out, scenario{name, "checks/s", func(ctx context.Context, round int) (result, error) {
			r, err := st.wrk(ctx, name, st.counterURL, "limit:"+alg, round, true)
			if err != nil {
				return r, err
			}
			n, per, err := st.bytesPerKey("rl:{p:inline:*}:" + alg + ":*")
			if err != nil {
				return r, err
			}
			r.note = strings.TrimSpace(fmt.Sprintf("%.0f B per key (%d keys sampled) %s", per, n, r.note))
			return r, nil
		}})
	}
	return out
}

var limitAlgorithms = []string{"fixed_window", "sliding_log", "sliding_window", "leaky_bucket", "token_bucket", "gcra"}

// bytesPerKey is the mean MEMORY USAGE of up to 2000 keys matching
// pattern, read by one script in Redis.
func (st *stack) bytesPerKey(pattern string) (int, float64, error) {
	const script = `local cur, n, sum = '0', 0, 0
repeat
  local r = redis.call('SCAN', cur, 'MATCH', ARGV[1], 'COUNT', 1000)
  cur = r[1]
  for _, k in ipairs(r[2]) do
    if n < tonumber(ARGV[2]) then sum = sum + redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '0'); n = n + 1 end
  end
until cur == '0' or n >= tonumber(ARGV[2])
return {n, sum}`
	host, port, _ := net.SplitHostPort(st.redisAddr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "EVAL", script, "0", pattern, "2000").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("redis-cli EVAL: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("bytes per key: %q", out)
	}
	n, _ := strconv.Atoi(f[0])
	sum, _ := strconv.ParseFloat(f[1], 64)
	if n == 0 {
		return 0, 0, fmt.Errorf("no key matches %s", pattern)
	}
	return n, sum / float64(n), nil
}

var (
	rpsRE = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	latRE = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([\d.]+)(us|ms|s)\s*$`)
	errRE = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)|Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

// wrk runs wrk -t2 -c50 for the scenario duration, measuring the CPU of
// every process, and takes a CPU profile of the services in round 1.
func (st *stack) wrk(ctx context.Context, name, url, mode string, round int, profile bool) (result, error) {
	args := []string{"-t2", "-c50", "-d" + strconv.Itoa(int(st.s.duration.Seconds())) + "s", "--latency"}
	if mode != "" {
		args = append(args, "-s", "bench/wrk/freqcap.lua")
	}
	cmd := exec.CommandContext(ctx, "wrk", append(args, url)...)
	cmd.Env = append(os.Environ(), "MODE="+mode, "FILL="+strconv.Itoa(st.s.fill), "RUN="+strconv.FormatInt(time.Now().UnixNano(), 36),
		"DECIDE_CIDS="+strings.Join(decideCIDs(), ","))
	if profile && round == 1 {
		st.profile(name, st.counterOpsURL+"/debug/pprof/profile", "counter")
		if name == "end-to-end" {
			st.profile(name, st.adminURL+"/debug/pprof/profile", "callback")
		}
	}
	before, machineBefore := st.cpu(), machineTicks()
	degradedBefore := st.degraded()
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %w", err)
	}
	r := parseWrk(out)
	r.cpu = st.cpuSince(before, time.Since(start))
	r.busy, r.steal = machineTicks().since(machineBefore)
	r.cpu["wrk"] = 100 * (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds() / time.Since(start).Seconds()
	if d := st.degraded() - degradedBefore; d > 0 && name != "baseline" {
		r.note = fmt.Sprintf("%d degraded reads", d)
	}
	if r.errors > 0 {
		r.note = strings.TrimSpace(r.note + fmt.Sprintf(" %d errors", r.errors))
	}
	return r, nil
}

func parseWrk(out []byte) result {
	var r result
	if m := rpsRE.FindSubmatch(out); m != nil {
		r.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	for _, m := range latRE.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(string(m[2]), 64)
		d := time.Duration(v * float64(map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[string(m[3])]))
		if string(m[1]) == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	for _, m := range errRE.FindAllSubmatch(out, -1) {
		for _, g := range m[1:] {
			n, _ := strconv.Atoi(string(g))
			r.errors += n
		}
	}
	return r
}

func (st *stack) cpu() map[string]int64 {
	m := map[string]int64{}
	for _, p := range st.procs {
		m[p.name] = p.cpuTicks()
	}
	return m
}

func (st *stack) cpuSince(before map[string]int64, took time.Duration) map[string]float64 {
	m := map[string]float64{}
	for _, p := range st.procs {
		// /proc counts in clock ticks of 1/100 s on Linux.
		m[p.name] = 100 * float64(p.cpuTicks()-before[p.name]) / 100 / took.Seconds()
	}
	return m
}

// profile fetches a CPU profile of one service for the scenario's duration.
func (st *stack) profile(scenario, url, service string) {
	secs := max(1, int(st.s.duration.Seconds())-1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("%s?seconds=%d", url, secs))
		if err != nil {
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(st.s.out, "profiles", scenario+"-"+service+".pprof"))
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
}

// metric sums every sample of a Prometheus series family on url.
// metric sums the samples of a metric whose labels hold every one of
// labels ("name=value"), parsed with Prometheus's own text parser.
func metric(url, name string, labels ...string) float64 {
	v, _ := rig.Metric(url, name, labels...)
	return v
}

func (st *stack) degraded() int {
	return int(metric(st.counterOpsURL+"/metrics", "freqcap_counter_degraded_reads_total"))
}

// endToEnd drives callback's /win at full speed, waits for the journal to
// empty, and checks that every accepted notice was counted exactly once.
func (st *stack) endToEnd(ctx context.Context, round int) (result, error) {
	key := "freq:{win:tagid:42:e2e}"
	countedBefore, err := st.redisInt(key)
	if err != nil {
		return result{}, err
	}
	acceptedBefore := metric(st.adminURL+"/metrics", "freqcap_callback_notices_accepted_total")
	unsureBefore := metric(st.adminURL+"/metrics", "freqcap_callback_notices_rejected_total", "reason=journal_unavailable")
	refusedBefore := metric(st.adminURL+"/metrics", "freqcap_callback_notices_rejected_total")
	if err := st.redisCLI("CONFIG", "RESETSTAT"); err != nil {
		return result{}, err
	}
	r, err := st.wrk(ctx, "end-to-end", st.callbackURL, "win", round, true)
	if err != nil {
		return r, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for metric(st.adminURL+"/metrics", "freqcap_callback_journal_undelivered") > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	// Read after the wait: requests wrk left in flight when it stopped are
	// answered (and counted as accepted) by now.
	accepted := int64(metric(st.adminURL+"/metrics", "freqcap_callback_notices_accepted_total") - acceptedBefore)
	countedAfter, err := st.redisInt(key)
	if err != nil {
		return r, err
	}
	counted := countedAfter - countedBefore
	dropped := metric(st.adminURL+"/metrics", "freqcap_callback_dropped_total")
	// Notices refused with 503 (journal full or slow) are the exchange's to
	// resend: the rate is what callback accepted, and all of it must be
	// counted. A 503 for a journal write that did not answer in time is
	// unsure: Redis may have run it, and then the notice counts (once: the
	// exchange's resend carries the same eid).
	unsure := int64(metric(st.adminURL+"/metrics", "freqcap_callback_notices_rejected_total", "reason=journal_unavailable") - unsureBefore)
	refused := int64(metric(st.adminURL+"/metrics", "freqcap_callback_notices_rejected_total") - refusedBefore)
	r.rate = float64(accepted) / st.s.duration.Seconds()
	r.note = fmt.Sprintf("accepted %d, counted %d, dropped %.0f, refused %d (503 after an unsure journal write: %d)",
		accepted, counted, dropped, refused, unsure)
	if stats, err := st.commandStats(); err == nil && accepted > 0 {
		r.note += "; Redis per notice: " + stats.perNotice(accepted, innerCalls())
	}
	if counted < accepted || counted > accepted+unsure {
		return r, fmt.Errorf("loss or double count: accepted %d notices (and %d unsure), counted %d", accepted, unsure, counted)
	}
	return r, nil
}

func (st *stack) redisCLI(args ...string) error {
	host, port, _ := net.SplitHostPort(st.redisAddr)
	return exec.Command("redis-cli", append([]string{"-h", host, "-p", port}, args...)...).Run()
}

// cmdStats are Redis's INFO commandstats: per command, calls and
// microseconds spent.
type cmdStats map[string][2]float64

func (st *stack) commandStats() (cmdStats, error) {
	host, port, _ := net.SplitHostPort(st.redisAddr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "INFO", "commandstats").Output()
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+),usec=(\d+)`)
	stats := cmdStats{}
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		calls, _ := strconv.ParseFloat(m[2], 64)
		usec, _ := strconv.ParseFloat(m[3], 64)
		stats[m[1]] = [2]float64{calls, usec}
	}
	return stats, nil
}

// perNotice says what Redis ran per notice: the microseconds its commands
// took in all, and each command that took at least 1 µs, with its calls.
// A function's time (FCALL's, in INFO commandstats) includes the commands
// it calls, which Redis also counts as commands of their own: those the
// counting library calls (inner) are shown apart, and not counted again
// in the total.
func (c cmdStats) perNotice(notices int64, inner map[string]bool) string {
	n := float64(notices)
	var total float64
	var outer, in []string
	for name, v := range c {
		if !inner[name] {
			total += v[1]
		}
		if v[1]/n < 1 {
			continue
		}
		if inner[name] {
			in = append(in, name)
		} else {
			outer = append(outer, name)
		}
	}
	list := func(names []string) string {
		sort.Slice(names, func(i, j int) bool { return c[names[i]][1] > c[names[j]][1] })
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s %.1f µs (%.2f calls)", name, c[name][1]/n, c[name][0]/n)
		}
		return strings.Join(parts, ", ")
	}
	s := fmt.Sprintf("%.1f µs in commands: %s", total/n, list(outer))
	if len(in) > 0 {
		s += "; inside the functions' time: " + list(in)
	}
	return s
}

// innerCalls are the commands the counting library's functions call
// (lower case, as INFO commandstats names them).
func innerCalls() map[string]bool {
	lib, _ := core.Library()
	calls := map[string]bool{}
	for _, m := range regexp.MustCompile(`redis\.call\('([A-Z]+)'`).FindAllStringSubmatch(lib, -1) {
		calls[strings.ToLower(m[1])] = true
	}
	return calls
}

func (st *stack) redisInt(key string) (int64, error) {
	host, port, _ := net.SplitHostPort(st.redisAddr)
	out, err := exec.Command("redis-cli", "-h", host, "-p", port, "GET", key).Output()
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(out))
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// redisBenchmark runs the counter's write script as one dimension of a
// notice runs it (the day and the hour buckets, with an event id, quiet as
// callback forwards it) in
// redis-benchmark, 16 per round trip: the ceiling one Redis core sets on
// writes.
func (st *stack) redisBenchmark(ctx context.Context) (result, error) {
	host, port, _ := net.SplitHostPort(st.redisAddr)
	lib, fns := core.Library()
	out, err := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "FUNCTION", "LOAD", "REPLACE", lib).Output()
	if err != nil || !strings.HasPrefix(string(out), "freqcap_") { // redis-cli prints an error and exits 0
		return result{}, fmt.Errorf("FUNCTION LOAD: %q, %v", out, err)
	}
	now := time.Now()
	hour := strconv.FormatInt(now.Unix()/3600, 10)
	// Sized to run about the scenario duration at the rate measured here.
	n := strconv.Itoa(int(st.s.duration.Seconds()) * 40_000)
	before := st.cpu()
	start := time.Now()
	tag := "{rb:device:42:__rand_int__}"
	cmd := exec.CommandContext(ctx, "redis-benchmark", "-h", host, "-p", port, "-P", "16", "-c", "50", "-n", n, "-r", "1000000", "-q",
		"FCALL", fns.Count, "3", "dedup:"+tag, "freq:"+tag, "hfreq:"+tag,
		"1", strconv.FormatInt(now.UnixMilli(), 10), "600000", "-1", "e-__rand_int__",
		"window", "86400000", "hours", hour, "169", "3", "608400000")
	out, err = cmd.Output()
	if err != nil {
		return result{}, err
	}
	m := regexp.MustCompile(`([\d.]+) requests per second`).FindSubmatch(out)
	if m == nil {
		return result{}, fmt.Errorf("no rate in %q", out)
	}
	r := result{cpu: st.cpuSince(before, time.Since(start))}
	r.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	r.cpu["redis-benchmark"] = 100 * (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds() / time.Since(start).Seconds()
	return r, nil
}

// constantRate measures latency at a fixed request rate with vegeta: hot
// and cold reads, and the baseline server as the floor that the machine and
// the load generator set.
func (st *stack) constantRate(ctx context.Context, name string, round int) (result, error) {
	var seq atomic.Int64
	targeter := func(t *vegeta.Target) error {
		t.Method = http.MethodGet
		switch name {
		case "latency-baseline":
			t.URL = st.baseURL + "/"
		case "latency-hot":
			t.URL = st.counterURL + "/v1/freq?cid=42&bundle=com.hot&tagid=7&windowHours=3"
		case "latency-win":
			// The exchange-facing latency of a notice: validate, persist
			// in the journal, answer.
			t.URL = fmt.Sprintf("%s/win?cid=42&device=%s&tagid=lat&eid=lat-%d", st.callbackURL, deviceID(int(seq.Add(1)%int64(st.s.fill))), seq.Load())
		default:
			i := int(seq.Add(1) * 7919 % int64(st.s.fill))
			t.URL = st.counterURL + "/v1/freq?cid=42&device=" + deviceID(i) + "&windowHours=3"
		}
		return nil
	}
	newAttacker := func() *vegeta.Attacker {
		return vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Workers(64), vegeta.Timeout(time.Second))
	}
	// Warm up first (connections, goroutine stacks, caches): the first
	// seconds of a fresh run measure the start, not the steady state. An
	// attacker runs one attack, so the measured run gets its own.
	for range newAttacker().Attack(targeter, vegeta.Rate{Freq: st.s.rate, Per: time.Second}, 2*time.Second, "warm-up") {
	}
	attacker := newAttacker()
	if name == "latency-win" && round == 1 {
		st.profile(name, st.adminURL+"/debug/pprof/profile", "callback")
	}
	var m vegeta.Metrics
	before := st.cpu()
	start := time.Now()
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: st.s.rate, Per: time.Second}, st.s.duration, "latency") {
		m.Add(res)
		if ctx.Err() != nil {
			attacker.Stop()
		}
	}
	m.Close()
	r := result{rate: m.Throughput, p50: m.Latencies.P50, p99: m.Latencies.P99, p999: m.Latencies.Quantile(0.999),
		cpu: st.cpuSince(before, time.Since(start))}
	for code, n := range m.StatusCodes {
		if code < "200" || code > "299" {
			r.errors += n
		}
	}
	return r, ctx.Err()
}

// freezeDevices are the devices the freeze run reads, each once before
// the freeze so the counter has their last-known values; one read in 11
// is for a device it has not read.
const freezeDevices = 2000

// readOnce reads the first n devices once through the 5 ms counter, so
// it has their last-known values.
func (st *stack) readOnce(n int) error {
	for i := range n {
		resp, err := http.Get(st.counter5URL + "/v1/freq?cid=42&device=" + deviceID(i) + "&windowHours=3")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

// freeze reads devices at the constant rate from the counter with the
// production 5 ms deadline while Redis is frozen (SIGSTOP) for all but the
// first and last second of the run: p99 must stay within the deadline + 2
// ms, and the note says how many answers were stale (last-known), zero
// (degraded) and fresh.
func (st *stack) freeze(ctx context.Context) (result, error) {
	if err := st.readOnce(freezeDevices); err != nil {
		return result{}, err
	}
	var seq atomic.Int64
	targeter := func(t *vegeta.Target) error {
		t.Method = http.MethodGet
		i := int(seq.Add(1) * 7919 % (freezeDevices * 11 / 10))
		t.URL = st.counter5URL + "/v1/freq?cid=42&device=" + deviceID(i) + "&windowHours=3"
		return nil
	}
	attacker := vegeta.NewAttacker(vegeta.KeepAlive(true), vegeta.Workers(64), vegeta.Timeout(time.Second), vegeta.MaxBody(512))
	frozen := make(chan struct{})
	var thawed atomic.Int64 // unix ns of SIGCONT
	go func() {
		time.Sleep(time.Second)
		_ = st.redis.cmd.Process.Signal(syscall.SIGSTOP)
		close(frozen)
		time.Sleep(st.s.duration - 2*time.Second)
		_ = st.redis.cmd.Process.Signal(syscall.SIGCONT)
		thawed.Store(time.Now().UnixNano())
	}()
	var firstFresh time.Duration // from SIGCONT to the end of the first fresh answer sent after it
	var m vegeta.Metrics
	var stale, zero, fresh int
	before := st.cpu()
	start := time.Now()
	for res := range attacker.Attack(targeter, vegeta.Rate{Freq: st.s.rate, Per: time.Second}, st.s.duration, "freeze") {
		m.Add(res)
		switch body := string(res.Body); {
		case strings.Contains(body, `"stale":true`):
			stale++
		case strings.Contains(body, `"degraded":true`):
			zero++
		default:
			fresh++
			if t := thawed.Load(); t > 0 && firstFresh == 0 && res.Timestamp.UnixNano() >= t {
				firstFresh = res.Timestamp.Add(res.Latency).Sub(time.Unix(0, t))
			}
		}
		if ctx.Err() != nil {
			attacker.Stop()
		}
	}
	m.Close()
	<-frozen
	_ = st.redis.cmd.Process.Signal(syscall.SIGCONT) // in case the run ended first
	r := result{rate: m.Throughput, p50: m.Latencies.P50, p99: m.Latencies.P99, p999: m.Latencies.Quantile(0.999),
		cpu: st.cpuSince(before, time.Since(start))}
	for code, n := range m.StatusCodes {
		if code < "200" || code > "299" {
			r.errors += n
		}
	}
	n := max(stale+zero+fresh, 1)
	r.note = fmt.Sprintf("Redis frozen %s of %s: %.1f%% stale, %.1f%% zero (never read before), %.1f%% fresh; first fresh answer %s after SIGCONT",
		st.s.duration-2*time.Second, st.s.duration, 100*float64(stale)/float64(n), 100*float64(zero)/float64(n), 100*float64(fresh)/float64(n), ms(firstFresh))
	return r, ctx.Err()
}

// cpuTimes are the machine's CPU times from /proc/stat, in ticks.
type cpuTimes struct{ busy, steal, all int64 }

func machineTicks() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var t cpuTimes
	// cpu  user nice system idle iowait irq softirq steal ...
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i >= 8 { // guest time is in user's already
			break
		}
		t.all += v
		switch i {
		case 3, 4: // idle, iowait
		case 7:
			t.steal += v
		default:
			t.busy += v
		}
	}
	return t
}

// since is the share of every core that was busy (the processes' and the
// kernel's work) and stolen by the hypervisor, in percent, since t0.
func (t cpuTimes) since(t0 cpuTimes) (busy, steal float64) {
	all := float64(t.all - t0.all)
	if all <= 0 {
		return 0, 0
	}
	return 100 * float64(t.busy-t0.busy) / all, 100 * float64(t.steal-t0.steal) / all
}

// machine describes where the bench ran.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`model name\s*:\s*(.+)`).FindSubmatch(b); m != nil {
			model = string(m[1])
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
