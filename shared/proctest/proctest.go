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
	logs   *buffer
	exited chan struct{}
	err    error
}

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Start runs bin with env added to this process's environment and waits
// until healthURL answers 200. The process is killed when the test ends
// and its output is logged if the test failed.
func Start(t testing.TB, bin, healthURL string, env ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, name: filepath.Base(bin), logs: &buffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("%s exited before it was healthy: %v\n%s", p.name, p.err, p.logs.String())
		default:
		}
		if resp, err := http.Get(healthURL); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy at %s after 10s\n%s", p.name, healthURL, p.logs.String())
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
