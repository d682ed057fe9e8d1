package core

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/shared/redisconn"
)

// replicatedWrites sends a write's script runs so that they are answered
// only once n replicas of their master have them: each node's runs go on a
// connection of their own followed by WAIT n (WAIT counts what its own
// connection wrote). On a Cluster the runs are grouped by the master
// serving their slot, from CLUSTER SLOTS, read at start, every few seconds
// and when a run is redirected; each node's group goes out at once.
type replicatedWrites struct {
	rdb     rueidis.Client
	n       int64
	timeout time.Duration // longest WAIT
	cluster bool
	owners  atomic.Pointer[[]string] // slot -> master address; nil until read
	reading sync.Mutex
	readAt  atomic.Int64 // unix ns of the last CLUSTER SLOTS
}

func newReplicatedWrites(rdb rueidis.Client, n int, timeout time.Duration) *replicatedWrites {
	if n <= 0 {
		return nil
	}
	return &replicatedWrites{rdb: rdb, n: int64(n), timeout: timeout, cluster: rdb.Mode() == rueidis.ClientModeCluster}
}

// slotsEvery is how often a Cluster's slot owners are read again.
const slotsEvery = 5 * time.Second

// DoMulti is rdb.DoMulti with every answer waiting for the replicas.
func (w *replicatedWrites) DoMulti(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(cmds))
	if !w.cluster {
		w.send(ctx, w.rdb, cmds, out, allOf(len(cmds)))
		return out
	}
	owners, err := w.slotOwners(ctx, false)
	if err != nil {
		for i := range out {
			out[i] = rueidis.NewErrorResult(err)
		}
		return out
	}
	groups := map[string][]int{}
	for i, c := range cmds {
		addr := owners[c.Slot()]
		groups[addr] = append(groups[addr], i)
	}
	nodes := w.rdb.Nodes()
	var wg sync.WaitGroup
	for addr, idx := range groups {
		node, ok := nodes[addr]
		if !ok || addr == "" {
			for _, i := range idx {
				out[i] = rueidis.NewErrorResult(fmt.Errorf("no connection to the master of slot %d (%q)", cmds[i].Slot(), addr))
			}
			continue
		}
		group := make(rueidis.Commands, len(idx))
		for k, i := range idx {
			group[k] = cmds[i]
		}
		wg.Go(func() { w.send(ctx, node, group, out, idx) })
	}
	wg.Wait()
	for _, r := range out {
		if redirected(r.Error()) {
			go func() { _, _ = w.slotOwners(context.Background(), true) }()
			break
		}
	}
	return out
}

func redirected(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := re.IsMoved()
	_, ask := re.IsAsk()
	return moved || ask
}

func allOf(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// send runs cmds and a WAIT on one connection of node (a command that
// blocks takes the whole pipeline to a dedicated connection) and puts the
// answers at out[idx[k]].
func (w *replicatedWrites) send(ctx context.Context, node rueidis.Client, cmds rueidis.Commands, out []rueidis.RedisResult, idx []int) {
	var deadline time.Time
	if d, ok := ctx.Deadline(); ok {
		deadline = d
	}
	rs := node.DoMulti(ctx, append(cmds[:len(cmds):len(cmds)], redisconn.Wait(node.B(), w.n, w.timeout, deadline))...)
	// Not replicated: answered as not written (10001); the caller's retry
	// with the same event id counts once.
	werr := redisconn.Replicated(rs[len(rs)-1], w.n)
	for k, i := range idx {
		out[i] = rs[k]
		if werr != nil && rs[k].Error() == nil {
			out[i] = rueidis.NewErrorResult(werr)
		}
	}
}

// slotOwners is the master address serving each slot, read with CLUSTER
// SLOTS when it is older than slotsEvery (or now, with again).
func (w *replicatedWrites) slotOwners(ctx context.Context, again bool) ([]string, error) {
	age := func() time.Duration { return time.Since(time.Unix(0, w.readAt.Load())) }
	if o := w.owners.Load(); o != nil && !again && age() < slotsEvery {
		return *o, nil
	}
	w.reading.Lock()
	defer w.reading.Unlock()
	// Another call may have read them while this one waited for the lock.
	if o := w.owners.Load(); o != nil && (!again && age() < slotsEvery || again && age() < 100*time.Millisecond) {
		return *o, nil
	}
	ranges, err := w.rdb.Do(ctx, w.rdb.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		if o := w.owners.Load(); o != nil {
			return *o, nil // the last known owners; a redirect says when they moved
		}
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	owners := make([]string, 16384)
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			continue
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		master, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 || lo < 0 || hi >= 16384 || lo > hi {
			continue
		}
		host, _ := master[0].ToString()
		port, _ := master[1].AsInt64()
		addr := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		for s := lo; s <= hi; s++ {
			owners[s] = addr
		}
	}
	w.owners.Store(&owners)
	w.readAt.Store(time.Now().UnixNano())
	return owners, nil
}
