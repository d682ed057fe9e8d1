package core

import (
	"context"
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
// (limit.lua's kinds): a run defines every function of its script anew,
// about 7,000 instructions each, so a run is sent the variant with only
// its own.
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

// function is a Redis Function of a library the store loads itself (the
// count library: its parts are defined once, when Redis loads it, not on
// every run). A write batch sends FCALLs in its one DoMulti; when Redis
// answers that the function is not there (a restart without persistence,
// FUNCTION FLUSH, a new node), load puts the library on every node and
// the runs go again.
type function struct {
	src, name string
}

func (f *function) fcall(c rueidis.Client, keys, args []string) rueidis.Completed {
	return c.B().Fcall().Function(f.name).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// load loads the library on every node the client knows. A replica
// refuses (it gets the library from its master); the error returned is
// the last one when no node took it.
func (f *function) load(ctx context.Context, c rueidis.Client) error {
	var last error
	loaded := false
	for _, node := range c.Nodes() {
		err := node.Do(ctx, node.B().FunctionLoad().Replace().FunctionCode(f.src).Build()).Error()
		if err == nil {
			loaded = true
			continue
		}
		last = err
	}
	if loaded {
		return nil
	}
	return last
}

func isNoFunction(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "Function not found")
}
