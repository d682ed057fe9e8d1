// Package ratelimit is the rate limiting over the counting core: policies
// (named in a file, or a rule inline), the check of a hit against them all
// or nothing, and the view counter that counts a view only when its
// viewer is within limits. The counter serves them over HTTP and RPC.
package ratelimit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// inline is the policy name of checks that give their rule inline.
const inline = "inline"

// Policy is a set of limits checked together: a named one from
// COUNTER_LIMITS_FILE, or an inline one built for one check.
type Policy struct {
	name   string
	specs  []counting.Spec // the first, then the ones decided with it
	shadow bool
	// header is the RateLimit-Policy field value.
	header string
}

// LoadPolicies reads a policy file (YAML or JSON; YAML is read as JSON is)
// and checks every policy as a check would; "" is none.
func LoadPolicies(path string, lim *core.Limits) (map[string]*Policy, error) {
	out := map[string]*Policy{}
	if path == "" {
		return out, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f counting.PolicyFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, p := range f.Policies {
		field := fmt.Sprintf("policies[%d].", i)
		switch {
		case !ids.ValidCID(p.Name) || p.Name == inline:
			return nil, fmt.Errorf("%s: %sname must be %s, and not %q", path, field, ids.CIDRule, inline)
		case out[p.Name] != nil:
			return nil, fmt.Errorf("%s: %sname %q twice", path, field, p.Name)
		}
		pol, err := newPolicy(p.Name, p.Rule, p.Limits, p.Mode, lim, field)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[p.Name] = pol
	}
	return out, nil
}

// newPolicy checks a rule (or several) and turns it into specs.
func newPolicy(name string, rule counting.Rule, rules []counting.Rule, mode string, lim *core.Limits, field string) (*Policy, error) {
	p := &Policy{name: name}
	switch mode {
	case "", counting.Enforce:
	case counting.Shadow:
		p.shadow = true
	default:
		return nil, apierr.Invalid("%smode must be %q or %q", field, counting.Enforce, counting.Shadow)
	}
	listed := len(rules) > 0
	switch {
	case listed && rule != (counting.Rule{}):
		return nil, apierr.Invalid("%slimits: give one rule inline or limits, not both", field)
	case !listed:
		rules = []counting.Rule{rule}
	}
	if len(rules) > core.MaxLimits {
		return nil, apierr.Invalid("%slimits: at most %d", field, core.MaxLimits)
	}
	p.specs = make([]counting.Spec, len(rules))
	for i, r := range rules {
		f := field
		if listed {
			f = fmt.Sprintf("%slimits[%d].", field, i)
		}
		s, err := specOf(r, f)
		if err != nil {
			return nil, err
		}
		p.specs[i] = s
	}
	it := p.Item("k", 1)
	if err := lim.Check(&it, true, field); err != nil {
		return nil, err
	}
	names := make([]string, len(p.specs))
	for i, s := range p.specs {
		names[i] = fmt.Sprintf("%s;q=%d;w=%d", strconv.Quote(p.limitName(i)), s.Limit, CeilDiv(s.PeriodMs, 1000))
	}
	p.header = strings.Join(names, ", ")
	return p, nil
}

// specOf is a rule's spec.
func specOf(r counting.Rule, field string) (counting.Spec, error) {
	if !core.IsLimiter(r.Algorithm) {
		return counting.Spec{}, apierr.Invalid("%salgorithm must be one of %v; got %q", field, core.Limiters(), r.Algorithm)
	}
	d, err := time.ParseDuration(r.Period)
	switch {
	case err != nil:
		return counting.Spec{}, apierr.Invalid("%speriod must be a duration such as \"1s\", \"1m\", \"24h\": %q", field, r.Period)
	case d < time.Millisecond || d > core.MaxPeriodMs*time.Millisecond || d%time.Millisecond != 0:
		return counting.Spec{}, apierr.Invalid("%speriod must be whole milliseconds between 1ms and 720h, got %s", field, r.Period)
	}
	return counting.Spec{Kind: r.Algorithm, Limit: r.Limit, PeriodMs: d.Milliseconds(), Burst: r.Burst, Capacity: r.Capacity, Acquire: r.Acquire}, nil
}

// Name is the policy's name ("inline" for a rule given with a check).
func (p *Policy) Name() string { return p.name }

// Header is the RateLimit-Policy field value.
func (p *Policy) Header() string { return p.header }

// Limits is how many limits the policy holds.
func (p *Policy) Limits() int { return len(p.specs) }

// limitName is the name of the policy's i-th limit in RateLimit fields.
func (p *Policy) limitName(i int) string {
	if len(p.specs) == 1 {
		return p.name
	}
	return p.name + "." + strconv.Itoa(i)
}

// Item is the counting item of a check of cost on key.
func (p *Policy) Item(key string, cost int64) counting.Item {
	it := counting.Item{Scope: counting.Scope{Policy: p.name}, Subject: counting.Subject{ID: key}, Spec: p.specs[0], Hits: cost}
	it.Spec.Shadow = p.shadow
	if len(p.specs) > 1 {
		it.Spec.Also = p.specs[1:]
	}
	return it
}

// RateLimit is the RateLimit field value of an answer.
func (p *Policy) RateLimit(a *counting.LimitAnswer) string {
	ds := a.Limits
	if len(ds) == 0 {
		ds = []counting.Decision{{Remaining: a.Remaining, ResetAfterMs: a.ResetAfterMs}}
	}
	b := make([]byte, 0, 48*len(ds))
	for i, d := range ds {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendQuote(b, p.limitName(i))
		b = strconv.AppendInt(append(b, ";r="...), d.Remaining, 10)
		b = strconv.AppendInt(append(b, ";t="...), CeilDiv(d.ResetAfterMs, 1000), 10)
	}
	return string(b)
}

// CeilDiv is a/b rounded up, 0 for a <= 0.
func CeilDiv(a, b int64) int64 {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// inlinePolicy is the policy of a check's inline rule. A single rule's
// policy is built (validated, its header written) once and kept, for up
// to maxInline rules; a policy is never changed once built.
func inlinePolicy(req *counting.LimitRequest, lim *core.Limits, field string) (*Policy, error) {
	if len(req.Limits) > 0 {
		return newPolicy(inline, req.Rule, req.Limits, "", lim, field)
	}
	key := inlineKey{req.Rule, lim}
	if p, ok := inlines.Load(key); ok {
		return p.(*Policy), nil
	}
	p, err := newPolicy(inline, req.Rule, nil, "", lim, field)
	if err == nil && inlineCount.Load() < maxInline {
		if _, loaded := inlines.LoadOrStore(key, p); !loaded {
			inlineCount.Add(1)
		}
	}
	return p, err
}

// inlineKey names an inline rule's policy: the rule, under the limits it
// was checked against.
type inlineKey struct {
	rule counting.Rule
	lim  *core.Limits
}

// maxInline bounds the inline policies kept: callers send a few rules,
// and a caller that sends a new one every time builds each anew.
const maxInline = 4096

var (
	inlines     sync.Map // inlineKey -> *Policy
	inlineCount atomic.Int32
)

// Resolve turns a check into its policy and item, refusing bad input with
// the field named under field.
func Resolve(named map[string]*Policy, lim *core.Limits, req *counting.LimitRequest, field string) (*Policy, counting.Item, error) {
	cost := int64(1)
	if req.Cost != nil {
		cost = *req.Cost
	}
	if cost < 0 || cost > core.MaxHits {
		return nil, counting.Item{}, apierr.Invalid("%scost must be between 0 and %d", field, core.MaxHits)
	}
	if !ids.ValidKey(req.Key) {
		return nil, counting.Item{}, apierr.Invalid("%skey must be %s", field, ids.KeyRule)
	}
	var p *Policy
	if req.Policy != "" {
		if req.Rule != (counting.Rule{}) || len(req.Limits) > 0 {
			return nil, counting.Item{}, apierr.Invalid("%spolicy: give a policy or an inline rule, not both", field)
		}
		if p = named[req.Policy]; p == nil {
			return nil, counting.Item{}, apierr.Invalid("%spolicy %q is not in the counter's policy file", field, req.Policy)
		}
	} else {
		var err error
		if p, err = inlinePolicy(req, lim, field); err != nil {
			return nil, counting.Item{}, err
		}
	}
	it := p.Item(req.Key, cost)
	switch req.Mode {
	case "":
	case counting.Enforce:
		it.Spec.Shadow = false
	case counting.Shadow:
		it.Spec.Shadow = true
	default:
		return nil, counting.Item{}, apierr.Invalid("%smode must be %q or %q", field, counting.Enforce, counting.Shadow)
	}
	return p, it, nil
}
