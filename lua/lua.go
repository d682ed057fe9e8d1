// Package lua holds the Redis scripts of freqcap, one per kind of counter.
// Each .lua file starts with a comment that documents its KEYS, ARGV and
// return value.
package lua

import _ "embed"

// Window counts hits in a window opened by the first hit (String + TTL):
// kinds day and seconds.
//
//go:embed window.lua
var Window string

// Hours counts hits in the current hour bucket of an hour Hash.
//
//go:embed hours.lua
var Hours string

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
