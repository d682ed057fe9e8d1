package client_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/freqcap/freqcap/client"
)

// count stands in for callback: it counts one win notice on the counter.
func count(query string) {
	req, err := http.NewRequest(http.MethodPost, counterURL+"/v1/incr?"+query, nil)
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
}

func ExampleClient_Decide() {
	// Earlier today: three wins of campaign 42 and one of campaign 43 on
	// this device (callback counts these from the exchanges' notices).
	for i := range 3 {
		count(fmt.Sprintf("cid=42&device=dev-1&bundle=com.example&windowHours=24&eid=ex-a%d:1", i))
	}
	count("cid=43&device=dev-1&bundle=com.example&windowHours=24&eid=ex-b1:1")

	// Once, at start-up. Timeout is the bidder's budget for the call (10 ms
	// by default; more here for a loaded test machine).
	fc, err := client.New(counterURL, client.Options{Timeout: time.Second, Token: testToken})
	if err != nil {
		panic(err)
	}

	// For every bid request: one call for all candidate campaigns.
	ids := client.Identities{"device": "dev-1", "bundle": "com.example", "tagid": "banner-1"}
	decisions, err := fc.Decide(context.Background(), ids, []client.Candidate{
		{CID: "42", Caps: []client.Cap{{Dim: "device", Day: 3}}},
		{CID: "43", Caps: []client.Cap{
			{Dim: "device", Day: 10, Windows: []client.Window{{Hours: 2, Limit: 5}, {Hours: 24, Limit: 20}}},
			{Dim: "bundle", Windows: []client.Window{{Hours: 24, Limit: 1}}},
		}},
		{CID: "44", Caps: []client.Cap{{Dim: "device", Day: 1}}},
	})
	if err != nil {
		fmt.Println("degraded:", err) // decisions are still usable: they fail open
	}
	for _, d := range decisions {
		fmt.Println(d)
	}
	// Output:
	// 42: blocked by day_cap on device (3 of 3)
	// 43: blocked by window_cap 24h on bundle (1 of 1)
	// 44: allowed
}

func ExampleNoticeURLs() {
	n := client.NoticeURLs("https://cb.example.com", "42", client.Identities{"device": "6f1c2a9e", "bundle": "com.example"})
	fmt.Println(n.Win)
	fmt.Println(n.Billing)
	fmt.Println(n.Imp)
	// Output:
	// https://cb.example.com/win?cid=42&bundle=com.example&device=6f1c2a9e&eid=${AUCTION_ID}:${AUCTION_IMP_ID}
	// https://cb.example.com/billing?cid=42&bundle=com.example&device=6f1c2a9e&eid=${AUCTION_ID}:${AUCTION_IMP_ID}
	// https://cb.example.com/imp?cid=42&bundle=com.example&device=6f1c2a9e&eid=${AUCTION_ID}:${AUCTION_IMP_ID}
}

func ExampleNewDirect() {
	// Earlier today: two wins of campaign 45 on this device.
	for i := range 2 {
		count(fmt.Sprintf("cid=45&device=dev-2&bundle=com.example&eid=ex-c%d:1", i))
	}

	// Once, at start-up: what the counter counts, and a client reading the
	// counter's Redis (its REDIS_URL) itself.
	schema, err := client.FetchSchema(context.Background(), counterURL, testToken)
	if err != nil {
		panic(err)
	}
	fc, err := client.NewDirect(redisURL, client.Options{Timeout: time.Second},
		client.DirectOptions{Schema: schema, CachedDims: []string{"bundle", "tagid"}})
	if err != nil {
		panic(err)
	}
	defer fc.Close()

	ids := client.Identities{"device": "dev-2", "bundle": "com.example"}
	decisions, _ := fc.Decide(context.Background(), ids, []client.Candidate{
		{CID: "45", Caps: []client.Cap{{Dim: "device", Day: 2}}},
		{CID: "45", Caps: []client.Cap{{Dim: "device", Day: 3}, {Dim: "bundle", Day: 100}}},
	})
	for _, d := range decisions {
		fmt.Println(d)
	}
	// Output:
	// 45: blocked by day_cap on device (2 of 2)
	// 45: allowed
}
