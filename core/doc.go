// Package core is freqcap's counting core: every counter, cap and limiter
// is an item of one contract (a scope, a subject, a spec, hits and an
// optional event id, package shared/counting), each kind of counter one
// Go file here and one Lua script (package lua), registered in kinds.go.
// The Store pipelines the items of a call to each Redis node, enforces
// the read deadline, stops waiting on a stalled Redis, answers last-known
// values, caches hot counters client-side and waits for replicas; Check
// validates items. The counter serves it over HTTP and gRPC, and the Go
// client's direct mode runs it in-process, so both read alike.
//
// It is named for what the design calls it, the counting core; the
// surfaces over it (package campaign, and the counter's frequency control,
// rate limits and views) use only its exported calls. It registers no
// metrics: a caller passes Metrics, or nothing.
package core
