// Command baseline is the HTTP ceiling of make bench: a bare net/http
// handler answering 13 bytes, the most any Go service can serve here.
package main

import (
	"fmt"
	"net/http"
	"os"
)

var hello = []byte("Hello, World!")

func main() {
	addr := os.Getenv("BASELINE_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8090"
	}
	err := http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(hello)
	}))
	fmt.Fprintln(os.Stderr, "baseline:", err)
	os.Exit(1)
}
