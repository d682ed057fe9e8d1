package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/counting"
)

// The view counter: a view counts toward an article's total
// only when the viewer is within the view limits (by default one view per
// viewer per article per 10 minutes and 100 per viewer per hour).
//
// The limits are keys of the viewer's hash tag, rl:{p:views:<viewer>}:...,
// the per-article one with the article after the tag; the total is
// views:{a:<article>}. On one Redis, one script decides the limits and
// increments the total. On Redis Cluster the total lives in another slot:
// the same script decides the limits in the viewer's slot, atomically and
// all or nothing, and the total is incremented right after in the
// article's; if that second step fails the answer is an error (503) and the
// view is not in the total, and a retry is refused by the per-article
// limit: a lost view, counted in freqcap_counter_redis_errors_total
// {op="view_total"}, never a double count.

// ViewPolicy parses the two view limits, "<algorithm>:<limit>/<period>"
// each, "none" for none.
func ViewPolicy(perArticle, perViewer string, lim *core.Limits) (*Policy, bool, error) {
	var rules []counting.Rule
	for _, v := range []struct{ name, s string }{{"COUNTER_VIEWS_PER_ARTICLE", perArticle}, {"COUNTER_VIEWS_PER_VIEWER", perViewer}} {
		if v.s == "none" {
			continue
		}
		alg, rest, ok1 := strings.Cut(v.s, ":")
		n, period, ok2 := strings.Cut(rest, "/")
		limit, err := strconv.ParseInt(n, 10, 64)
		if !ok1 || !ok2 || err != nil {
			return nil, false, fmt.Errorf("%s: want <algorithm>:<limit>/<period> such as sliding_log:1/10m, got %q", v.name, v.s)
		}
		rules = append(rules, counting.Rule{Algorithm: counting.Kind(alg), Limit: limit, Period: period})
	}
	if len(rules) == 0 {
		return nil, false, fmt.Errorf("COUNTER_VIEWS_PER_ARTICLE, COUNTER_VIEWS_PER_VIEWER: at least one view limit is required")
	}
	p, err := newPolicy("views", counting.Rule{}, rules, "", lim, "")
	if err != nil {
		return nil, false, fmt.Errorf("COUNTER_VIEWS_PER_ARTICLE, COUNTER_VIEWS_PER_VIEWER: %w", err)
	}
	return p, perArticle != "none", nil
}

// TotalKey is the String holding an article's view total.
func TotalKey(article string) string { return "views:{a:" + core.Escape(article) + "}" }

// CountView decides one view of article by viewer against pol (per
// article too when perArticle) and adds it to the article's total when
// admitted; the error is Redis's.
func CountView(ctx context.Context, st *core.Store, pol *Policy, perArticle bool, article, viewer string) (counting.ViewAnswer, error) {
	sub := ""
	if perArticle {
		sub = "a:" + article
	}
	r, total, err := st.View(ctx, pol.Item(viewer, 1), sub, TotalKey(article))
	if err != nil {
		return counting.ViewAnswer{}, err
	}
	a := counting.ViewAnswer{Counted: r.Allowed, Total: total, RetryAfterMs: r.RetryAfterMs, Limits: r.Limits}
	if a.Limits == nil {
		a.Limits = []counting.Decision{{Allowed: r.Allowed, Remaining: r.Remaining, RetryAfterMs: r.RetryAfterMs, ResetAfterMs: r.ResetAfterMs}}
	}
	return a, nil
}
