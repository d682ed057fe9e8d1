// Package lua holds the Redis scripts of freqcap, one per kind of counter.
// Each .lua file starts with a comment that documents its KEYS, ARGV and
// return value.
package lua

import _ "embed"

// Count counts one event on one or more counters of one hash tag with one
// event-id check: count.lua with every part's function before it. A part
// is one file defining parts.<name>; see count.lua for the contract.
var Count = "local parts = {}\n" + window + hours + count

var (
	//go:embed count.lua
	count string
	//go:embed window.lua
	window string
	//go:embed hours.lua
	hours string
)

// Sliding checks and records one event in an exact sliding window with an
// optional limit and minimum gap.
//
//go:embed sliding.lua
var Sliding string

// Unpace takes back an event Sliding recorded.
//
//go:embed unpace.lua
var Unpace string

// Limit checks a hit against one or more rate limits (seed 004) all or
// nothing: limit.lua with every kind's function before it. A kind is one
// file defining kinds.<name>; see limit.lua for the contract.
var Limit = "local kinds = {}\n" +
	fixedWindow + slidingLog + slidingWindow + leakyBucket + tokenBucket + gcra +
	limit

var (
	//go:embed limit.lua
	limit string
	//go:embed fixed_window.lua
	fixedWindow string
	//go:embed sliding_log.lua
	slidingLog string
	//go:embed sliding_window.lua
	slidingWindow string
	//go:embed leaky_bucket.lua
	leakyBucket string
	//go:embed token_bucket.lua
	tokenBucket string
	//go:embed gcra.lua
	gcra string
)
