// Package redisconn opens the rueidis client every service uses, from a
// Redis URL in rueidis form (redis://[user:pass@]host:port[/db][?addr=..]).
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// Options parses rawURL into client options. Besides the query parameters
// rueidis understands (addr, dial_timeout, write_timeout, client_cache=0,
// protocol, ...), it takes single=1, which forces a single-node client for
// servers that do not answer CLUSTER commands.
func Options(rawURL string) (rueidis.ClientOption, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("REDIS_URL: %w", err)
	}
	q := u.Query()
	single := q.Get("single") == "1"
	q.Del("single")
	u.RawQuery = q.Encode()
	opt, err := rueidis.ParseURL(u.String())
	if err != nil {
		return opt, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.ForceSingleClient = single
	return opt, nil
}

// Open connects to the Redis at rawURL (REDIS_URL); tune, when given,
// adjusts the options first.
func Open(rawURL string, tune func(*rueidis.ClientOption)) (rueidis.Client, error) {
	opt, err := Options(rawURL)
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(&opt)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connect to redis (REDIS_URL=%s): %w", rawURL, err)
	}
	return c, nil
}

// Reach tells a Redis that refuses connections from a slow one. rueidis
// redials in the background, so a call that runs out of time meanwhile
// sees only its deadline; Reach remembers what the dials and the calls
// found. Install it on the options before opening the client.
type Reach struct{ down atomic.Bool }

// Install makes opt's dials report to r.
func (r *Reach) Install(opt *rueidis.ClientOption) {
	dial := opt.DialCtxFn
	opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		var c net.Conn
		var err error
		switch {
		case dial != nil:
			c, err = dial(ctx, dst, d, cfg)
		case cfg != nil:
			c, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", dst)
		default:
			c, err = d.DialContext(ctx, "tcp", dst)
		}
		var ne net.Error
		switch {
		case err == nil:
			r.down.Store(false)
		case errors.As(err, &ne) && ne.Timeout():
			// Nothing answered in time: a frozen or overloaded node (the
			// kernel of a stopped one may not finish the handshake), not
			// one that refuses.
		default:
			r.down.Store(true)
		}
		return c, err
	}
}

// Observe records a call's outcome: nil when Redis answered, else the
// first error that is not a reply of Redis's.
func (r *Reach) Observe(err error) {
	switch {
	case err == nil:
		r.down.Store(false)
	case isConnErr(err):
		r.down.Store(true)
	}
}

// Down reports whether the last dial or call found no connection.
func (r *Reach) Down() bool { return r.down.Load() }

// isConnErr reports whether err says there is no connection to Redis, as
// opposed to a slow one.
func isConnErr(err error) bool {
	var op *net.OpError
	switch {
	case errors.As(err, &op):
		// A dial or read that ran out of time found a node too slow to
		// answer, as Install's dials do; a refused or reset one is gone.
		return !op.Timeout()
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, rueidis.ErrClosing),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}

// ReadOnly is a rueidis SendToReplicas that sends every read-only command
// (GET, HMGET, ZCOUNT, ...) to a replica of its slot and everything else,
// scripts included, to the primary.
func ReadOnly(cmd rueidis.Completed) bool { return cmd.IsReadOnly() }

// MinReplicas is the fewest replicas any master has connected (INFO
// replication on every node rdb knows): what a WAIT for replicas can
// count on.
func MinReplicas(ctx context.Context, rdb rueidis.Client) (int, error) {
	least := -1
	for addr, c := range rdb.Nodes() {
		info, err := c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
		if err != nil {
			return 0, fmt.Errorf("INFO replication of %s: %w", addr, err)
		}
		if !strings.Contains(info, "role:master") {
			continue
		}
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
				if n, err := strconv.Atoi(v); err == nil && (least < 0 || n < least) {
					least = n
				}
			}
		}
	}
	return max(least, 0), nil
}

// ErrNotReplicated means writes reached their master but not the replicas
// asked for within the time WAIT had.
var ErrNotReplicated = errors.New("not replicated")

// Wait is WAIT n, for the writes sent before it on the same connection
// (WAIT counts only what its own connection wrote), with at most most and
// at most half the time left before deadline (zero: none). Half, because
// Redis ends a blocked command's wait only when its event loop wakes
// (every 100 ms at the default hz): WAIT then answers before its caller
// gives up, and says why.
func Wait(b rueidis.Builder, n int64, most time.Duration, deadline time.Time) rueidis.Completed {
	wait := most
	if !deadline.IsZero() {
		wait = min(wait, time.Until(deadline)/2)
	}
	return b.Wait().Numreplicas(n).Timeout(max(wait.Milliseconds(), 1)).Build()
}

// Replicated is nil when WAIT's answer r says n replicas have the writes;
// ErrNotReplicated (wrapped) when fewer did, or WAIT's own error.
func Replicated(r rueidis.RedisResult, n int64) error {
	got, err := r.AsInt64()
	if err == nil && got < n {
		err = fmt.Errorf("%w: %d of %d replicas in time", ErrNotReplicated, got, n)
	}
	return err
}

// ReportReplicas logs whether every master has the want replicas that
// setting asks for: what is then waited for (waits), or a warning that
// short masters refuse (refused) until enough replicas connect.
func ReportReplicas(ctx context.Context, log *slog.Logger, rdb rueidis.Client, want int, setting, waits, refused string) {
	switch n, err := MinReplicas(ctx, rdb); {
	case err != nil:
		log.Warn("replicas unknown", "setting", setting, "err", err)
	case n < want:
		log.Warn("a master has fewer replicas than "+setting+": "+refused+" until enough replicas are connected", "connected", n, "want", want)
	default:
		log.Info(waits+" wait for replicas", "replicas", want)
	}
}
