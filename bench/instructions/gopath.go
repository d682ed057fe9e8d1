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
}

// handlers are the paths make bench measures by throughput, as their
// packages' benchmarks run them.
var handlers = []handler{
	{"Go: hot read, GET /v1/freq bundle+tagid from the client-side cache", "./counter", "BenchmarkHotReadHandler"},
	{"Go: cold read, GET /v1/freq of a new device", "./counter", "BenchmarkColdReadHandler"},
	{"Go: rate-limit check, POST /v1/limit gcra", "./counter", "BenchmarkLimitHandler"},
	{"Go: AddFreq over Connect JSON", "./counter", "BenchmarkAddFreqHandler"},
	{"Go: a win at callback, GET /win appended to the journal", "./callback", "BenchmarkWinHandler"},
}

// measureHandlers counts the instructions the Go process executes per
// request of each handler whose name holds only: callgrind collects only
// while the router's ServeHTTP is on the stack (and, with one P, whatever
// the process runs meanwhile: the store's writer, rueidis's connection),
// over n requests. The benchmark's setup (its redis-server, the test
// data) is outside the router and not counted.
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
		per, err := handlerInstructions(ctx, bin, h.bench, n, dir)
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

// handlerInstructions runs benchmark bench of bin n times under callgrind,
// with one P, no asynchronous preemption (its signals) and no garbage
// collection (whose cycles fall on different requests from run to run:
// with it, runs of the same code differed by up to 14%, without it by
// under 1%; what a request allocates is counted, its share of the
// collector's work is not), collecting only inside the router, and
// answers the instructions per request.
func handlerInstructions(ctx context.Context, bin, bench string, n int, dir string) (int64, error) {
	out := filepath.Join(dir, "callgrind.go."+bench)
	var err error
	for range 8 {
		var per int64
		if per, err = handlerRun(ctx, bin, bench, n, out); !errors.Is(err, errSignal) {
			return per, err
		}
	}
	return 0, err
}

func handlerRun(ctx context.Context, bin, bench string, n int, out string) (int64, error) {
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind", "--collect-atstart=no",
		"--toggle-collect=github.com/go-chi/chi/v5.(*Mux).ServeHTTP", "--callgrind-out-file="+out,
		bin, "-test.run=^$", "-test.bench=^"+bench+"$", "-test.benchtime="+strconv.Itoa(n)+"x", "-test.count=1")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1", "GOGC=off")
	log, _ := cmd.CombinedOutput()
	if strings.Contains(string(log), "vgCallgrind_post_signal") {
		return 0, errSignal
	}
	if !strings.Contains(string(log), "\nPASS") && !strings.Contains(string(log), "ok ") && !strings.Contains(string(log), bench) {
		return 0, fmt.Errorf("%s: %s", bench, lastLines(string(log), 10))
	}
	total, err := totals(out)
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, lastLines(string(log), 10))
	}
	return total / int64(n), nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}
