// Command instructions counts the CPU instructions a redis-server executes
// per notice written, per read and per limiter check, under valgrind's
// callgrind: the same for the same binary and inputs whatever else the
// machine does, so a change of a few percent to a script shows. It starts
// its own redis-server under callgrind on a free loopback port, runs each
// operation N times through the counting core (as the counter does),
// dumps callgrind's counters around each, and prints instructions per
// operation (the Redis event loop and network included, as in production).
// Then a notice end to end: through a counter and a callback built here
// (see notices). Last, the services' own instructions per request of the
// paths make bench measures by throughput, in their handler benchmarks
// (see handlers).
//
//	go run ./bench/instructions            # make bench-instructions
//	INSTRUCTIONS_N=2000 go run ./bench/instructions
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/bench/internal/rig"
	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "instructions:", err)
		os.Exit(1)
	}
}

// op is one operation counted: it runs n times from i0.
type op struct {
	name  string
	reads bool // the first write's devices
	run   func(ctx context.Context, st *core.Store, i0, n int) error
}

func run() error {
	n := 2000
	if v := os.Getenv("INSTRUCTIONS_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return fmt.Errorf("INSTRUCTIONS_N: want a positive whole number, got %q", v)
		}
	}
	// INSTRUCTIONS_OUT keeps callgrind's dumps there (one per operation and
	// one per warm-up, in order), for callgrind_annotate.
	dir := os.Getenv("INSTRUCTIONS_OUT")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "instructions")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	srv, addr, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	rdb, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer rdb.Close()
	o := core.Defaults
	o.ReadTimeout, o.HotKeyRate = 10*time.Second, 0
	st := core.NewStore(rdb, o, nil)
	defer st.Close()
	fmt.Printf("redis-server instructions per operation, %d of each, under callgrind (%s)\n", n, redisVersion())
	fmt.Println("| operation | instructions |\n|---|---|")
	only := os.Getenv("INSTRUCTIONS_ONLY") // the operations whose names hold it
	for k, o := range ops() {
		if !strings.Contains(o.name, only) {
			continue
		}
		per, err := measure(st, o, k, n, dir, srv.Process.Pid)
		if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		fmt.Printf("| %s | %d |\n", o.name, per)
	}
	if err := measureAllNotices(rdb, addr, only, n, dir, srv.Process.Pid); err != nil {
		return err
	}
	return measureHandlers(context.Background(), only, n, dir)
}

// measureAllNotices counts the Redis work of a notice end to end, through
// a real callback and counter: unsigned and signed, with journal entries
// of one field (CALLBACK_JOURNAL_FORMAT=2) and of a field per value (1).
func measureAllNotices(rdb rueidis.Client, addr, only string, n int, dir string, pid int) error {
	type variant struct {
		name, short string
		signed      bool
		format      int
	}
	vs := []variant{
		{"notice end to end, unsigned: callback's journal and forwarding, the counter's runs (device and a shared tagid), CALLBACK_JOURNAL_FORMAT=2", "unsigned, 2", false, 2},
		{"notice end to end, signed (its fingerprint kept until its URL expires), CALLBACK_JOURNAL_FORMAT=2", "signed, 2", true, 2},
		{"notice end to end, unsigned, CALLBACK_JOURNAL_FORMAT=1 (a field per value)", "unsigned, 1", false, 1},
		{"notice end to end, signed, CALLBACK_JOURNAL_FORMAT=1", "signed, 1", true, 1},
	}
	ctx := context.Background()
	bin := ""
	for k, v := range vs {
		if !strings.Contains(v.name, only) {
			continue
		}
		if bin == "" {
			bin = filepath.Join(dir, "bin")
			if err := rig.Build(ctx, bin, "./counter", "./callback"); err != nil {
				return err
			}
		}
		e := &notices{bin: bin, redisAddr: addr, signed: v.signed, format: v.format}
		per, background, err := e.measure(ctx, rdb, len(ops())+k, n, dir, pid)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		fmt.Printf("| %s | %d |\n", v.name, per)
		defer fmt.Printf("(notice end to end, %s: the services' background work, %d instructions a second, taken out)\n", v.short, background)
	}
	return nil
}

// measure runs operation o, the k-th, n times against the store and
// answers the instructions redis-server (pid, dumping into dir) executed
// per run.
func measure(st *core.Store, o op, k, n int, dir string, pid int) (int64, error) {
	ctx := context.Background()
	// Warm-up: scripts loaded, connections open. Each operation has
	// devices of its own (a read, those the first write wrote).
	base := k * 1_000_000
	if o.reads {
		base = 0
	}
	if err := o.run(ctx, st, base+900_000, 50); err != nil {
		return 0, err
	}
	before, err := dump(dir, pid)
	if err != nil {
		return 0, err
	}
	if err := o.run(ctx, st, base+1000, n); err != nil {
		return 0, err
	}
	after, err := dump(dir, pid)
	if err != nil {
		return 0, err
	}
	return (after - before) / int64(n), nil
}

// ops are the operations counted: a notice's write of one dimension as
// callback sends it (day, hour window, event id), its quiet form (no
// answers computed), a bidder's read of a device and a limiter check.
func ops() []op {
	write := func(quiet, release bool, eid string, hours int) func(ctx context.Context, st *core.Store, i0, n int) error {
		return func(ctx context.Context, st *core.Store, i0, n int) error {
			for i := i0; i < i0+n; i++ {
				q := campaign.Query{CID: "42", Event: "win", Dims: []campaign.Dim{{Name: "device", ID: device(i)}}, Windows: []int{hours},
					EID: eid + strconv.Itoa(i), Quiet: quiet, Release: release, ReserveEvent: "win"}
				its, _ := campaign.Items([]campaign.Query{q}, true)
				for _, r := range st.Write(ctx, its) {
					if r.Code != 0 {
						return errors.New(r.Msg)
					}
				}
			}
			return nil
		}
	}
	ops := []op{
		{"notice write, 1 dimension (day + 24 h window + event id)", false, write(false, false, "e-", 24)},
		{"the same, quiet (callback's forwarding: no counts answered)", false, write(true, false, "e-", 24)},
		{"quiet, of a device already counted this hour", true, write(true, false, "again-", 24)},
		{"quiet win releasing its bid's reservation (none held), as callback sends wins", false, write(true, true, "w-", 24)},
		{"notice write, 1 dimension with a 3 h window (its hours named in an HMGET, as make bench's /v1/incr)", false, write(false, false, "e3-", 3)},
		{"quiet wins as callback forwards them, per notice: device and a shared tagid, 16 notices a batch", false, batchedWins(true)},
		{"the same, of a bidder that never reserves (rsv=0: no release)", false, batchedWins(false)},
		{"device read (day + 24 h window)", true, func(ctx context.Context, st *core.Store, i0, n int) error {
			for i := i0; i < i0+n; i++ {
				q := campaign.Query{CID: "42", Event: "win", Dims: []campaign.Dim{{Name: "device", ID: device(i)}}, Windows: []int{24}}
				its, _ := campaign.Items([]campaign.Query{q}, false)
				for _, r := range st.Read(ctx, its) {
					if r.Code != 0 && r.Code != 10002 {
						return errors.New(r.Msg)
					}
				}
			}
			return nil
		}},
		{"limiter check (gcra, 100/s)", false, limiterCheck(counting.GCRA, 1000, 100)},
	}
	// Each kind on a key of its own per check, as make bench's random keys
	// (100 a minute).
	for _, k := range core.Limiters() {
		ops = append(ops, op{"limiter check on a new key, 100/min: " + string(k), false, limiterCheck(k, 60000, 0)})
	}
	return ops
}

// limiterCheck checks one hit against a limit of 100 per periodMs of kind
// k, on keys keys apart (0: a new key every check).
func limiterCheck(k counting.Kind, periodMs int64, keys int) func(ctx context.Context, st *core.Store, i0, n int) error {
	return func(ctx context.Context, st *core.Store, i0, n int) error {
		for i := i0; i < i0+n; i++ {
			key := i
			if keys > 0 {
				key = i % keys
			}
			it := counting.Item{Scope: counting.Scope{Policy: "api"}, Subject: counting.Subject{ID: string(k) + "-" + device(key)},
				Spec: counting.Spec{Kind: k, Limit: 100, PeriodMs: periodMs}, Hits: 1}
			for _, r := range st.Write(ctx, []counting.Item{it}) {
				if r.Code != 0 {
					return errors.New(r.Msg)
				}
			}
		}
		return nil
	}
}

// batchedWins writes wins as callback forwards them: 16 notices a batch,
// each on its own device and one shared tagid, quiet, releasing their
// bids' reservations unless the notices said none was made (rsv=0).
func batchedWins(release bool) func(ctx context.Context, st *core.Store, i0, n int) error {
	return func(ctx context.Context, st *core.Store, i0, n int) error {
		return writeWins(ctx, st, i0, n, release)
	}
}

func writeWins(ctx context.Context, st *core.Store, i0, n int, release bool) error {
	for i := i0; i < i0+n; i += 16 {
		qs := make([]campaign.Query, 0, 16)
		for k := i; k < min(i+16, i0+n); k++ {
			qs = append(qs, campaign.Query{CID: "42", Event: "win", Windows: []int{24}, EID: "b-" + strconv.Itoa(k), Quiet: true,
				Release: release, ReserveEvent: "win", Dims: []campaign.Dim{{Name: "device", ID: device(k)}, {Name: "tagid", ID: "7"}}})
		}
		its, _ := campaign.Items(qs, true)
		for _, r := range st.Write(ctx, its) {
			if r.Code != 0 {
				return errors.New(r.Msg)
			}
		}
	}
	return nil
}

func device(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i) }

// startRedis starts redis-server under callgrind on a free port, without
// persistence, and waits until it answers.
func startRedis(dir string) (*exec.Cmd, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "callgrind.out"),
		"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("valgrind (apt-get install valgrind): %w", err)
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return cmd, addr, nil
		}
	}
	_ = cmd.Process.Kill()
	return nil, "", errors.New("redis-server under callgrind did not answer within 60 s")
}

// dump has callgrind write its counters so far and answers the total
// instructions (Ir) since redis-server started.
func dump(dir string, pid int) (int64, error) {
	before, _ := filepath.Glob(filepath.Join(dir, "callgrind.out.*"))
	if out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("callgrind_control: %v: %s", err, out)
	}
	var files []string
	for deadline := time.Now().Add(30 * time.Second); len(files) <= len(before); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return 0, errors.New("callgrind wrote no dump")
		}
		files, _ = filepath.Glob(filepath.Join(dir, "callgrind.out.*"))
	}
	var total int64
	for _, f := range files { // each dump holds what ran since the one before
		n, err := totals(f)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// totals reads a dump's "totals:" (or "summary:") line.
func totals(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"totals:", "summary:"} {
			if v, ok := strings.CutPrefix(line, p); ok {
				return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("%s: no totals", path)
}

// redisVersion names the redis-server binary measured.
func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "redis-server"
	}
	return strings.TrimSpace(string(out))
}
