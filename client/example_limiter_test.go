package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/freqcap/freqcap/client"
)

func ExampleLimiter() {
	// Once, at start-up. Local: once the counter refuses a check, answer
	// the same check locally until its Retry-After, without a round trip.
	// The policy "export" is 5 per hour (COUNTER_LIMITS_FILE).
	l, err := client.NewLimiter(counterURL, client.LimiterOptions{Timeout: time.Second, Local: true, Token: testToken})
	if err != nil {
		panic(err)
	}
	var admitted, refusedLocally, refusedByCounter int
	for range 8 {
		v, err := l.Allow(context.Background(), "export", "tenant-42")
		if err != nil {
			fmt.Println("degraded:", err) // admitted: checks fail open
		}
		switch {
		case v.Allowed:
			admitted++
		case v.Local:
			refusedLocally++
		default:
			refusedByCounter++
		}
	}
	fmt.Printf("admitted %d, refused locally %d, refused by the counter %d\n", admitted, refusedLocally, refusedByCounter)
	// Output:
	// admitted 5, refused locally 2, refused by the counter 1
}
