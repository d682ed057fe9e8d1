// Package lua holds the Redis scripts of freqcap. Each .lua file starts with
// a comment that documents its KEYS, ARGV and return value.
package lua

import _ "embed"

// Incr counts one event on one counter: the natural-day String and, when a
// window is asked for, the hour-bucket Hash, idempotent by event id.
//
//go:embed incr.lua
var Incr string

// Pace checks and records one event in an exact sliding window with a
// minimum gap between events.
//
//go:embed pace.lua
var Pace string

// Unpace takes back an event Pace recorded.
//
//go:embed unpace.lua
var Unpace string
