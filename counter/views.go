package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/ratelimit"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
)

// views serves POST /v1/views and GET /v1/views.
type views struct {
	log          *slog.Logger
	store        *core.Store
	pol          *ratelimit.Policy
	perArticle   bool
	writeTimeout time.Duration
	readTimeout  time.Duration
}

// count decides one view and counts it; the error is Redis's.
func (v *views) count(ctx context.Context, article, viewer string) (counting.ViewAnswer, error) {
	return ratelimit.CountView(ctx, v.store, v.pol, v.perArticle, article, viewer)
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
		n, err := v.store.Total(ctx, ratelimit.TotalKey(article))
		ans := map[string]any{"article": article, "total": n, "degraded": err != nil}
		if err != nil {
			code := v.store.Code(err)
			deg.count(r, code, core.FirstLine(err))
			ans["total"], ans["code"] = 0, code
		}
		httpjson.Write(w, http.StatusOK, ans)
	})
}
