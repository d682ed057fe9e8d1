// Package lua holds the Redis scripts of freqcap: one per kind of counter,
// and callback's journal append.
// Each .lua file starts with a comment that documents its KEYS, ARGV and
// return value.
//
// Every script that may grow Redis's memory starts with the Redis 7
// shebang "#!lua" (writes, no flags): Redis then refuses the whole run up
// front with OOM when it is past maxmemory. Without a shebang, Redis
// checks memory only at a script's first command flagged deny-oom, and
// not at all once the script has written: count.lua, which first prunes
// its dedupe set (ZREMRANGEBYSCORE, allowed when full since it frees
// memory), would then go on counting into a full Redis.
package lua

import _ "embed"

// writes heads a script that may grow memory: refused when Redis is full.
const writes = "#!lua\n"

// frees heads a script that only ever removes data: allowed when full.
const frees = "#!lua flags=allow-oom\n"

// Count counts one event on one or more counters of one hash tag with one
// event-id check: count.lua with every part's function before it. A part
// is one file defining parts.<name>; see count.lua for the contract.
var Count = writes + "local parts = {}\n" + window + hours + count

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
var Sliding = writes + sliding

// Unpace takes back an event Sliding recorded; it runs when Redis is full
// too, since it only removes.
var Unpace = frees + unpace

var (
	//go:embed sliding.lua
	sliding string
	//go:embed unpace.lua
	unpace string
)

// Append writes a signed notice to callback's journal unless a notice
// with the same fingerprint was taken while its URL is valid.
var Append = writes + appendNotice

//go:embed append.lua
var appendNotice string

// Limit checks a hit against one or more rate limits (seed 004) all or
// nothing: limit.lua with every kind's function before it. A kind is one
// file defining kinds.<name>; see limit.lua for the contract.
var Limit = writes + "local kinds = {}\n" +
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
