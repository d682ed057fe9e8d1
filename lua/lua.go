// Package lua holds the Redis scripts of freqcap: one per kind of counter,
// and callback's journal append.
// Each .lua file starts with a comment that documents its KEYS, ARGV and
// return value.
//
// Every script that may grow Redis's memory starts with the Redis 7
// shebang "#!lua" (writes, no flags), and the library's functions
// have no flags either: Redis then refuses the whole run up front with OOM
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

// Functions names the functions of the library (Library).
type Functions struct {
	// Count runs count.lua: events counted on the parts of one tag.
	Count string
	// Limit runs limit.lua: one rate-limit check against limits of one tag.
	Limit string
}

// Library is count.lua and limit.lua as one Redis Functions library:
// every part (the file <part>.lua defining parts.<part> with its bit and
// nargs; see count.lua for the contract) and every limiter kind (the
// file <kind>.lua defining kinds.<kind> with its nargs; see limit.lua) defined once,
// when Redis loads the library, and two functions, fns.Count and
// fns.Limit, that run count.lua and limit.lua on their keys and
// arguments. A script run would define its parts or kinds anew (about
// 7,000 instructions each); a function call defines nothing. The library
// and its functions are named after the source's hash, so the libraries
// of two versions of the counter sit side by side in Redis. The
// functions have no flags: they may write, and Redis refuses them up
// front with OOM when it is past maxmemory, as writes' "#!lua" scripts
// are refused.
func Library() (src string, fns Functions) {
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		panic(err)
	}
	var body strings.Builder
	// A function reads globals through its library's environment, and
	// only the functions of the redis API exist while a library loads:
	// the globals the files use become upvalues at the first call.
	body.WriteString("local register = redis.register_function\n")
	body.WriteString("local function globals() return tonumber, unpack, bit, math, string, redis end\n")
	body.WriteString("local tonumber, unpack, bit, math, string, redis\n")
	body.WriteString("local KEYS, ARGV -- each call's, for count.lua, limit.lua, the parts and kinds\n")
	body.WriteString("local parts, kinds = {}, {}\n")
	for _, name := range names {
		src, base := file(name), strings.TrimSuffix(name, ".lua")
		if strings.Contains(src, "\nparts."+base+" = {") || strings.Contains(src, "\nkinds."+base+" = {") {
			body.WriteString(src)
		}
	}
	for _, name := range []string{"count", "limit"} {
		body.WriteString("local function " + name + "()\n" + file(name+".lua") + "end\n")
	}
	h := sha1.Sum([]byte(body.String()))
	sum := hex.EncodeToString(h[:6])
	fns = Functions{Count: "freqcap_count_" + sum, Limit: "freqcap_limit_" + sum}
	body.WriteString(register(fns.Count, "count") + register(fns.Limit, "limit"))
	return "#!lua name=freqcap_" + sum + "\n" + body.String(), fns
}

// register is the library's line registering fn to run body (count or
// limit) with each call's keys and arguments.
func register(fn, body string) string {
	return "register('" + fn + "', function(keys, args)\n" +
		"  if not tonumber then tonumber, unpack, bit, math, string, redis = globals() end\n" +
		"  KEYS, ARGV = keys, args\n  return " + body + "()\nend)\n"
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
