// Package proctest builds the service binaries and runs them as real
// processes for end-to-end tests.
package proctest

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles the given packages (module paths such as ./counter,
// relative to the module root) into dir, as `make build` does.
func Build(dir string, pkgs ...string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
	}
	return nil
}

func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the module root")
	}
	return filepath.Join(filepath.Dir(file), "..", ".."), nil
}

// Proc is a running service process owned by a test.
type Proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	logs   *Buffer
	exited chan struct{}
	err    error
}

// Buffer collects a process's output; it is safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Start runs bin with env added to this process's environment and waits
// until healthURL answers 200. The process is killed when the test ends
// and its output is logged if the test failed.
func Start(t testing.TB, bin, healthURL string, env ...string) *Proc {
	t.Helper()
	p, err := launch(t, bin, healthURL, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.logs.String())
		}
	})
	return p
}

// Launch is Start outside any one test, for TestMain; Kill it when the run
// ends.
func Launch(bin, healthURL string, env ...string) (*Proc, error) {
	return launch(nil, bin, healthURL, env)
}

func launch(t testing.TB, bin, healthURL string, env []string) (*Proc, error) {
	p := &Proc{t: t, name: filepath.Base(bin), logs: &Buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before it was healthy: %v\n%s", p.name, p.err, p.logs.String())
		default:
		}
		if resp, err := http.Get(healthURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("%s not healthy at %s after 10s\n%s", p.name, healthURL, p.logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Logs is everything the process printed so far.
func (p *Proc) Logs() string { return p.logs.String() }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// Wait waits up to within for the process to exit and returns its error.
func (p *Proc) Wait(within time.Duration) error {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.err
	case <-time.After(within):
		p.t.Fatalf("%s still running after %s", p.name, within)
		return nil
	}
}
