// Package lua holds the Redis scripts of freqcap: one per kind of counter,
// and callback's journal append.
// Each .lua file starts with a comment that documents its KEYS, ARGV and
// return value.
//
// Every script that may grow Redis's memory starts with the Redis 7
// shebang "#!lua" (writes, no flags), and the count library's function
// has no flags either: Redis then refuses the whole run up front with OOM
// when it is past maxmemory. Without a shebang, Redis
// checks memory only at a script's first command flagged deny-oom, and
// not at all once the script has written: count.lua, which first prunes
// its dedupe set (ZREMRANGEBYSCORE, allowed when full since it frees
// memory), would then go on counting into a full Redis.
package lua

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"io/fs"
	"strings"
)

// writes heads a script that may grow memory: refused when Redis is full.
const writes = "#!lua\n"

// frees heads a script that only ever removes data: allowed when full.
const frees = "#!lua flags=allow-oom\n"

// files are every script: a kind's Lua is the file named after it.
//
//go:embed *.lua
var files embed.FS

// file is the script of one file; a missing one is a programming error
// that every test of the counting core meets at once.
func file(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("lua: no " + name)
	}
	return string(b)
}

// CountLibrary is lua/count.lua as a Redis Functions library: every
// part (the file <part>.lua defining parts.<part> with its bit and nargs;
// see count.lua for the contract) defined once, when Redis loads the
// library, and one function, fn, that runs count.lua on its keys and
// arguments. A script run would define every part anew (about 7,000
// instructions a part); a function call defines nothing. lib and fn are
// named after the source's hash, so the libraries of two versions of the
// counter sit side by side in Redis. fn has no flags: it may write, and
// Redis refuses it up front with OOM when it is past maxmemory, as
// writes' "#!lua" scripts are refused.
func CountLibrary() (src, fn string) {
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		panic(err)
	}
	var body strings.Builder
	// A function reads globals through its library's environment, and
	// only the functions of the redis API exist while a library loads:
	// the globals count.lua and the parts use become upvalues at the
	// first call.
	body.WriteString("local register = redis.register_function\n")
	body.WriteString("local function globals() return tonumber, unpack, bit, math, redis end\n")
	body.WriteString("local tonumber, unpack, bit, math, redis\n")
	body.WriteString("local KEYS, ARGV -- each call's, for count.lua and the parts\nlocal parts = {}\n")
	for _, name := range names {
		if src := file(name); strings.Contains(src, "\nparts."+strings.TrimSuffix(name, ".lua")+" = {") {
			body.WriteString(src)
		}
	}
	body.WriteString("local function count()\n")
	body.WriteString(file("count.lua"))
	body.WriteString("end\n")
	h := sha1.Sum([]byte(body.String()))
	sum := hex.EncodeToString(h[:6])
	fn = "freqcap_count_" + sum
	return "#!lua name=freqcap_" + sum + "\n" + body.String() +
		"register('" + fn + "', function(keys, args)\n" +
		"  if not tonumber then tonumber, unpack, bit, math, redis = globals() end\n" +
		"  KEYS, ARGV = keys, args\n  return count()\nend)\n", fn
}

// Limit is the script that checks a hit against one or more rate limits
// all or nothing: limit.lua with the function of every kind before it. A
// kind is the file <kind>.lua defining kinds.<kind>; see limit.lua for
// the contract.
func Limit(kinds []string) string {
	var b strings.Builder
	b.WriteString(writes + "local kinds = {}\n")
	for _, k := range kinds {
		b.WriteString(file(k + ".lua"))
	}
	b.WriteString(file("limit.lua"))
	return b.String()
}

// Sliding checks and records one event in an exact sliding window with an
// optional limit and minimum gap.
var Sliding = writes + file("sliding.lua")

// Unpace takes back an event Sliding recorded; it runs when Redis is full
// too, since it only removes.
var Unpace = frees + file("unpace.lua")

// Append writes a signed notice to callback's journal unless a notice
// with the same fingerprint was taken while its URL is valid.
var Append = writes + file("append.lua")
