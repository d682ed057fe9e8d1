package main

import (
	"context"
	"fmt"
	"github.com/freqcap/freqcap/core"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
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

// viewPolicy parses the two view limits, "<algorithm>:<limit>/<period>"
// each, "none" for none.
func viewPolicy(perArticle, perViewer string, lim *core.Limits) (*policy, bool, error) {
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

// views serves POST /v1/views and GET /v1/views.
type views struct {
	log          *slog.Logger
	store        *core.Store
	pol          *policy
	perArticle   bool
	writeTimeout time.Duration
	readTimeout  time.Duration
}

func totalKey(article string) string { return "views:{a:" + core.Escape(article) + "}" }

// count decides one view and counts it; the error is Redis's.
func (v *views) count(ctx context.Context, article, viewer string) (counting.ViewAnswer, error) {
	sub := ""
	if v.perArticle {
		sub = "a:" + article
	}
	r, total, err := v.store.View(ctx, v.pol.item(viewer, 1), sub, totalKey(article))
	if err != nil {
		return counting.ViewAnswer{}, err
	}
	a := counting.ViewAnswer{Counted: r.Allowed, Total: total, RetryAfterMs: r.RetryAfterMs, Limits: r.Limits}
	if a.Limits == nil {
		a.Limits = []counting.Decision{{Allowed: r.Allowed, Remaining: r.Remaining, RetryAfterMs: r.RetryAfterMs, ResetAfterMs: r.ResetAfterMs}}
	}
	return a, nil
}

func checkView(article, viewer string) error {
	switch {
	case !ids.ValidKey(article):
		return apierr.Invalid("article must be %s", ids.KeyRule)
	case !ids.ValidKey(viewer):
		return apierr.Invalid("viewer must be %s", ids.KeyRule)
	}
	return nil
}

// handleView is POST /v1/views {"article","viewer"}: whether the view
// counted, and the article's total. Views are writes: they do not fail
// open (503 with code 10001/10004; a retry is safe, the per-article limit
// refuses a view counted before).
func (v *views) handleView() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.ViewRequest
		if err := decodeBody(w, r, maxLimitBody, &req, `{"article":...,"viewer":...}`); err != nil {
			httpjson.Error(w, r, v.log, err)
			return
		}
		if err := checkView(req.Article, req.Viewer); err != nil {
			httpjson.Error(w, r, v.log, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), v.writeTimeout)
		defer cancel()
		a, err := v.count(ctx, req.Article, req.Viewer)
		if err != nil {
			httpjson.Error(w, r, v.log, apierr.Unavailablef("redis unavailable, retry: %s", core.FirstLine(err)))
			return
		}
		httpjson.Write(w, http.StatusOK, a)
	})
}

// handleTotal is GET /v1/views?article=..: the article's total, within the
// read deadline (degraded to 0 when Redis cannot answer).
func (v *views) handleTotal(deg *degrader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Params(r, map[string]bool{"article": false})
		if err != nil {
			httpjson.Error(w, r, v.log, err)
			return
		}
		article := q.Get("article")
		if !ids.ValidKey(article) {
			httpjson.Error(w, r, v.log, apierr.Invalid("article must be %s", ids.KeyRule))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), v.readTimeout)
		defer cancel()
		n, err := v.store.Total(ctx, totalKey(article))
		ans := map[string]any{"article": article, "total": n, "degraded": err != nil}
		if err != nil {
			code := v.store.Code(err)
			deg.count(r, code, core.FirstLine(err))
			ans["total"], ans["code"] = 0, code
		}
		httpjson.Write(w, http.StatusOK, ans)
	})
}
