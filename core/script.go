package core

import (
	"crypto/sha1"
	"encoding/hex"
	"slices"
	"strings"
	"sync"

	"github.com/redis/rueidis"
)

// script is one of the counter's Lua scripts. A write batch sends its runs
// as EVALSHA commands in one DoMulti (one pipelined round trip per node),
// and runs again with EVAL those Redis did not have yet (NOSCRIPT, after a
// restart or SCRIPT FLUSH); single runs use rueidis's Exec.
type script struct {
	*rueidis.Lua
	src, sha string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{Lua: rueidis.NewLuaScript(src), src: src, sha: hex.EncodeToString(h[:])}
}

func (s *script) evalsha(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func (s *script) eval(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// scriptSet holds the variants of one script by the parts each defines
// (count.lua's parts, limit.lua's kinds): a run defines every function of
// its script anew, about 2,000 instructions each, so a run is sent the
// variant with only its own.
type scriptSet struct {
	build func(names []string) string
	m     sync.Map // names joined with commas -> *script
}

// of is the variant defining names (any order, repeats allowed).
func (ss *scriptSet) of(names []string) *script {
	key := ""
	if len(names) == 1 {
		key = names[0] // a check of one limit: nothing to sort or join
	} else {
		names = slices.Compact(slices.Sorted(slices.Values(names)))
		key = strings.Join(names, ",")
	}
	if s, ok := ss.m.Load(key); ok {
		return s.(*script)
	}
	s, _ := ss.m.LoadOrStore(key, newScript(ss.build(names)))
	return s.(*script)
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}
