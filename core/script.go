package core

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"

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

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// function is a Redis Function of the library the store loads itself
// (lua.Library: its parts and limiter kinds are defined once, when Redis
// loads it, not on every run). A write batch sends FCALLs in its one
// DoMulti; when Redis answers that the function is not there (a restart
// without persistence, FUNCTION FLUSH, a new node), load puts the library
// on every node and the runs go again.
type function struct {
	src, name string
}

// fcall is a call of the function on keys with args. hashed gives the
// call its keys' slot, which a cluster sends it by, and by which rueidis
// picks one of its connections for a pipeline elsewhere (by its first
// command's); unhashed, on a Redis that is not a cluster, the keys go as
// arguments and their slot is not computed (see env.read).
func (f *function) fcall(c rueidis.Client, keys, args []string, hashed bool) rueidis.Completed {
	if !hashed {
		return c.B().Arbitrary("FCALL", f.name, strconv.Itoa(len(keys))).Args(keys...).Args(args...).Build()
	}
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

// exec calls the function alone (not in a write batch), loading the
// library first when Redis does not have it.
func (f *function) exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	r := c.Do(ctx, f.fcall(c, keys, args, true))
	if isNoFunction(r.Error()) {
		if err := f.load(ctx, c); err != nil {
			return rueidis.NewErrorResult(err)
		}
		r = c.Do(ctx, f.fcall(c, keys, args, true))
	}
	return r
}

func isNoFunction(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "Function not found")
}
