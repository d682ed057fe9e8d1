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

import (
	"embed"
	"maps"
	"regexp"
	"slices"
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

// Count is the script that counts one event on one or more counters of
// one hash tag with one event-id check: count.lua with the function of
// each part given, and of the parts those run (hours runs days), before
// it. A part is the file <part>.lua defining parts.<part> with its bit;
// see count.lua for the contract. A run defines every part of its script
// anew, about 2,000 instructions each, so a run's script holds only the
// parts it counts with.
func Count(parts []string) string {
	all := map[string]bool{}
	var add func(p string)
	add = func(p string) {
		if all[p] {
			return
		}
		all[p] = true
		for _, m := range usesPart.FindAllStringSubmatch(file(p+".lua"), -1) {
			add(m[1])
		}
	}
	for _, p := range parts {
		add(p)
	}
	var b strings.Builder
	b.WriteString(writes + "local parts = {}\n")
	for _, p := range slices.Sorted(maps.Keys(all)) {
		b.WriteString(file(p + ".lua"))
	}
	b.WriteString(file("count.lua"))
	return b.String()
}

// usesPart finds a part's call of another's function.
var usesPart = regexp.MustCompile(`parts\.(\w+)\.run\(`)

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
