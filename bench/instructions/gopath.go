package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// handler is one request path of a service, counted in the Go process:
// a handler benchmark of its package (the router, the middleware, the
// handler and the store, without the network) run under callgrind.
type handler struct {
	name, pkg, bench string
	// div: a request does the work of many (a batch), so its benchmark
	// runs n/div requests.
	div int
}

// handlers are the paths make bench measures by throughput, as their
// packages' benchmarks run them.
var handlers = []handler{
	{"Go: hot read, GET /v1/freq bundle+tagid from the client-side cache", "./counter", "BenchmarkHotReadHandler", 1},
	{"Go: cold read, GET /v1/freq of a new device", "./counter", "BenchmarkColdReadHandler", 1},
	{"Go: batch read, POST /v1/freq/batch of 50 campaigns on a new device", "./counter", "BenchmarkBatchReadHandler", 10},
	{"Go: write, POST /v1/incr of a new device and a shared bundle and tagid, answering its counts", "./counter", "BenchmarkWriteHandler", 1},
	{"Go: write batch, POST /v1/incr/batch of 20 notices (device, shared bundle and tagid)", "./counter", "BenchmarkWriteBatchHandler", 10},
	{"Go: rate-limit check, POST /v1/limit gcra", "./counter", "BenchmarkLimitHandler", 1},
	{"Go: AddFreq over Connect JSON", "./counter", "BenchmarkAddFreqHandler", 1},
	{"Go: a win at callback, GET /win appended to the journal", "./callback", "BenchmarkWinHandler", 1},
	{"Go: decide, POST /v1/decide of 50 campaigns by id on a new device (direct mode's DecideIDs runs the same code)", "./counter", "BenchmarkDecideHandler", 10},
}

// measureHandlers counts the instructions the Go process executes per
// request of each handler whose name holds only: its benchmark runs n
// and 3n requests, each run counted whole, and the difference is over 2n,
// so that the benchmark's setup (its redis-server's start, its test data)
// drops out. The loop's own making of each request (httptest.NewRequest,
// the body) stays in, the same for every version of the handler. With one
// P, the count holds what the process runs meanwhile: the store's writer
// and readers, rueidis's connection goroutines.
func measureHandlers(ctx context.Context, only string, n int, dir string) error {
	bins := map[string]string{}
	for _, h := range handlers {
		if !strings.Contains(h.name, only) {
			continue
		}
		bin, ok := bins[h.pkg]
		if len(bins) == 0 {
			fmt.Printf("\nthe services' instructions per request in their handlers (Go, one P), %d of each\n", n)
			fmt.Println("| handler | instructions |\n|---|---|")
		}
		if !ok {
			bin = filepath.Join(dir, filepath.Base(h.pkg)+".test")
			if out, err := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, h.pkg).CombinedOutput(); err != nil {
				return fmt.Errorf("go test -c %s: %v: %s", h.pkg, err, out)
			}
			bins[h.pkg] = bin
		}
		per, err := handlerInstructions(ctx, bin, h.bench, max(n/h.div, 1), dir)
		if err != nil {
			return fmt.Errorf("%s: %w", h.name, err)
		}
		fmt.Printf("| %s | %d |\n", h.name, per)
	}
	return nil
}

// errSignal is valgrind 3.19's callgrind failing an assertion on a signal
// a Go program's thread receives at start (now and then): the run is
// simply tried again.
var errSignal = errors.New("callgrind stopped on a signal")

// handlerInstructions answers the instructions per request of benchmark
// bench of bin: its runs of n and of 3n requests, under callgrind with one
// P, no asynchronous preemption (its signals) and no garbage collection
// (whose cycles fall on different requests from run to run: with it,
// runs of the same code differed by up to 14%; what a request allocates
// is counted, its share of the collector's work is not). Collecting only
// while the router's ServeHTTP runs (callgrind's --toggle-collect) was
// tried: Go's goroutine switches left callgrind collecting some of the
// loop's work in some runs, 17% apart.
//
// A run's setup now and then costs far more than usual (a hot read's
// difference once came out at 586,557 instead of about 22,500): each
// count is the least of two runs, setup's extra work being never
// negative.
func handlerInstructions(ctx context.Context, bin, bench string, n int, dir string) (int64, error) {
	var total [2]int64
	for k, runs := range []int{n, 3 * n} {
		for try := range 2 {
			out := filepath.Join(dir, fmt.Sprintf("callgrind.go.%s.%d.%d", bench, runs, try))
			var t int64
			var err error
			for range 20 {
				if t, err = handlerRun(ctx, bin, bench, runs, out); !errors.Is(err, errSignal) {
					break
				}
			}
			if err != nil {
				return 0, err
			}
			if try == 0 || t < total[k] {
				total[k] = t
			}
		}
	}
	return (total[1] - total[0]) / int64(2*n), nil
}

// handlerRun runs benchmark bench of bin for n requests under callgrind
// and answers the instructions of the whole run.
func handlerRun(ctx context.Context, bin, bench string, n int, out string) (int64, error) {
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind", "--callgrind-out-file="+out,
		bin, "-test.run=^$", "-test.bench=^"+bench+"$", "-test.benchtime="+strconv.Itoa(n)+"x", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1", "GOGC=off")
	_ = os.Remove(out)
	log, err := cmd.CombinedOutput()
	if strings.Contains(string(log), "vgCallgrind_post_signal") {
		return 0, errSignal
	}
	if err != nil || !strings.Contains(string(log), "\nPASS") {
		return 0, fmt.Errorf("%s: %v: %s", bench, err, lastLines(string(log), 10))
	}
	total, err := totals(out)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, lastLines(string(log), 10))
	}
	return total, nil
}

// lastLines is the last n lines of s, for an error that shows what a run
// printed last.
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}
