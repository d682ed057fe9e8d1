package httpserver

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// BenchmarkKeepAliveRequest serves HTTP/1.1 requests one after another on
// one kept-alive connection with the API limits: net/http's per-request
// work, the connection's deadlines included, client and server together.
func BenchmarkKeepAliveRequest(b *testing.B) {
	conn, br := testConn(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}), API, readHeaderTimeout)
	req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
