package main

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/time/rate"

	"github.com/freqcap/freqcap/shared/config"
)

// sourceLimit caps the notices one source (client IP) may send to this
// instance: CALLBACK_SOURCE_LIMIT, "<n>/<period>" (5000/1s), bursts of n.
// Each instance limits on its own, so k instances admit up to k times
// the rate from one source; the limit is there to stop one client from
// flooding the journal, not to meter exchanges.
type sourceLimit struct {
	every   rate.Limit
	burst   int
	mu      sync.Mutex // one limiter per source, even for its first requests at once
	sources *expirable.LRU[netip.Addr, *rate.Limiter]
	trusted []netip.Prefix // proxies whose X-Forwarded-For is believed
}

// maxSources bounds the limiters kept: the least recently seen source is
// forgotten first (and starts again with a full burst).
const maxSources = 100_000

func parseSourceLimit(limit, trusted string) (*sourceLimit, error) {
	if limit == "" {
		return nil, nil
	}
	n, period, ok := strings.Cut(limit, "/")
	count, err := strconv.Atoi(n)
	d, derr := time.ParseDuration(period)
	if !ok || err != nil || derr != nil || count < 1 || d <= 0 {
		return nil, fmt.Errorf("CALLBACK_SOURCE_LIMIT: want <notices>/<period> such as 5000/1s, got %q", limit)
	}
	s := &sourceLimit{every: rate.Limit(float64(count) / d.Seconds()), burst: count,
		sources: expirable.NewLRU[netip.Addr, *rate.Limiter](maxSources, nil, max(d, time.Minute))}
	for _, c := range config.List(trusted) {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("CALLBACK_TRUSTED_PROXIES: %q is not a CIDR: %v", c, err)
		}
		s.trusted = append(s.trusted, p)
	}
	return s, nil
}

// source is the client a request comes from: the connection's address, or
// behind trusted proxies the right-most address of X-Forwarded-For that is
// not one of them.
func (s *sourceLimit) source(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	addr = addr.Unmap()
	if !s.isTrusted(addr) {
		return addr
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		addr = hop.Unmap()
		if !s.isTrusted(addr) {
			break
		}
	}
	return addr
}

func (s *sourceLimit) isTrusted(a netip.Addr) bool {
	for _, p := range s.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allow takes one notice from the request's source; when refused it says
// how long until one more is admitted.
func (s *sourceLimit) allow(r *http.Request) (bool, time.Duration) {
	src := s.source(r)
	s.mu.Lock()
	l, ok := s.sources.Get(src)
	if !ok {
		l = rate.NewLimiter(s.every, s.burst)
		s.sources.Add(src, l)
	}
	s.mu.Unlock()
	res := l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return false, d
	}
	return true, 0
}
