package core

// Metrics receives what the store observes. The counter exports them to
// Prometheus; a bidder embedding the store (the client's direct mode)
// registers nothing unless it passes its own.
type Metrics interface {
	// RedisError counts a failed or timed-out Redis call of op (read,
	// write, view, view_total).
	RedisError(op string)
	// Duplicate counts a write whose event id was counted before.
	Duplicate()
	// Cache counts reads served from the client-side cache and those that
	// went to Redis.
	Cache(hits, misses int)
	// StaleReads counts items answered with their last-known value.
	StaleReads(n int)
}

// NopMetrics observes nothing.
type NopMetrics struct{}

func (NopMetrics) RedisError(string) {}
func (NopMetrics) Duplicate()        {}
func (NopMetrics) Cache(int, int)    {}
func (NopMetrics) StaleReads(int)    {}
