package client_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
)

func ExampleFreqControl() {
	ctx := context.Background()
	// Once, at start-up. ReadTimeout is the caller's budget for a read
	// (10 ms by default; more here for a loaded test machine).
	fc, err := client.NewFreqControl(counterURL, client.FreqOptions{ReadTimeout: time.Second, Token: testToken})
	if err != nil {
		panic(err)
	}
	// "At most 3 messages per user per day" for business 7: read, decide,
	// then count what was sent (with an event id, so a retry counts once).
	user := client.Key{BusinessID: 7, Key: "user:42"}
	for i := range 4 {
		f, err := fc.Get(ctx, user)
		if err != nil {
			fmt.Println("degraded:", err) // f is 0 and Degraded: fail open
		}
		if f.Freq >= 3 {
			fmt.Printf("message %d: refused, %d sent today\n", i, f.Freq)
			continue
		}
		added, err := fc.Add(ctx, client.Add{Key: user, Span: 1, Unit: client.Days, EventID: fmt.Sprint("msg-", i)})
		if err != nil {
			panic(err) // writes do not degrade: retry with the same event id
		}
		fmt.Printf("message %d: sent, %d today\n", i, added.Freq)
	}
	// Calls per business per second: a window of 1 s opened by the first Add.
	calls, _ := fc.AddBatch(ctx, []client.Add{
		{Key: client.Key{BusinessID: 8, Key: "api:search"}, Span: 1, Unit: client.Seconds},
		{Key: client.Key{BusinessID: 8, Key: "api:search"}, Span: 1, Unit: client.Seconds},
	})
	fmt.Println("calls this second:", calls[1].Freq)
	never, _ := fc.Get(ctx, client.Key{BusinessID: 7, Key: "user:nobody"})
	fmt.Println("never added:", never.Freq, never.Found)
	// Output:
	// message 0: sent, 1 today
	// message 1: sent, 2 today
	// message 2: sent, 3 today
	// message 3: refused, 3 sent today
	// calls this second: 2
	// never added: 0 false
}

func TestFreqControlFailsOpen(t *testing.T) {
	// A port nothing listens on: the read answers within its deadline,
	// degraded; the write is an error.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	fc, err := client.NewFreqControl("http://"+addr, client.FreqOptions{ReadTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f, err := fc.Get(context.Background(), client.Key{BusinessID: 1, Key: "k"})
	if err == nil || !f.Degraded || f.Freq != 0 || time.Since(start) > time.Second {
		t.Errorf("read of an unreachable counter: %+v %v after %s, want degraded with an error", f, err, time.Since(start))
	}
	if _, err := fc.Add(context.Background(), client.Add{Key: client.Key{BusinessID: 1, Key: "k"}, Span: 60}); err == nil {
		t.Error("write to an unreachable counter succeeded")
	}
	if _, err := client.NewFreqControl("counter:8081", client.FreqOptions{}); err == nil {
		t.Error("a URL without scheme was accepted")
	}
}
