package redisconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// A dial or read cut short by the call's deadline says Redis is slow, not
// gone: Observe must not mark it down, or the call that waited is answered
// 10004 instead of 10001. What a refusing or vanished Redis gives does.
func TestObserveTellsSlowFromGone(t *testing.T) {
	// The error net gives for a dial its context ended, as rueidis
	// returns it when a redial outlives the call.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, dialTimeout := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:1")
	if dialTimeout == nil {
		t.Fatal("dial with a passed deadline succeeded")
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		err  error
		down bool
	}{
		{dialTimeout, false},
		{fmt.Errorf("wrapped: %w", dialTimeout), false},
		{readTimeout, false},
		{context.DeadlineExceeded, false},
		{errors.New("ERR some reply of Redis's"), false},
		{refused, true},
		{reset, true},
		{io.EOF, true},
	}
	for _, tt := range tests {
		var r Reach
		r.Observe(tt.err)
		if r.Down() != tt.down {
			t.Errorf("Observe(%v): down %v, want %v", tt.err, r.Down(), tt.down)
		}
		// A success after it always clears it.
		r.Observe(nil)
		if r.Down() {
			t.Errorf("Observe(nil) after %v left it down", tt.err)
		}
	}
}
