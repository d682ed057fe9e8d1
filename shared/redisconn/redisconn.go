// Package redisconn opens the rueidis client every service uses, from a
// Redis URL in rueidis form (redis://[user:pass@]host:port[/db][?addr=..]).
package redisconn

import (
	"fmt"
	"net/url"

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
