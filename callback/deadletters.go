package main

import (
	"log/slog"
	"net/http"
	"regexp"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// deadID is what a dead letter's id looks like (a Redis Stream id).
var deadID = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// listLimit reads the limit parameter: 1..maxListLimit, def when absent.
func listLimit(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxListLimit {
		return 0, apierr.Invalid("limit must be a whole number between 1 and %d", maxListLimit)
	}
	return n, nil
}

// handleDeadLetters is GET /v1/deadletters?limit=100&after=<id>: a page of
// the dead-letter stream, oldest first, each with why it is there.
func handleDeadLetters(log *slog.Logger, j *Journal) http.Handler {
	type page struct {
		DeadLetters []deadLetter `json:"deadLetters"`
		Total       int64        `json:"total"`
		Next        string       `json:"next,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Params(r, map[string]bool{"limit": false, "after": false})
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		limit, err := listLimit(q.Get("limit"), 100)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		after := q.Get("after")
		if after != "" && !deadID.MatchString(after) {
			httpjson.Error(w, r, log, apierr.Invalid("after must be a dead letter's id (<ms>-<seq>)"))
			return
		}
		list, total, err := j.DeadLetters(r.Context(), after, limit)
		if err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
			return
		}
		p := page{DeadLetters: list, Total: total}
		if len(list) == limit {
			p.Next = list[len(list)-1].ID
		}
		httpjson.Write(w, http.StatusOK, p)
	})
}

// handleDeadLetterReplay is POST /v1/deadletters/replay[?id=<id>...]
// [&limit=N]: the dead letters named (or the oldest limit, 100 by
// default) go back into the journal with their event ids, once their
// cause is mended; each counts once.
func handleDeadLetterReplay(log *slog.Logger, j *Journal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Params(r, map[string]bool{"id": true, "limit": false})
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		limit, err := listLimit(q.Get("limit"), 100)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		ids := q["id"]
		if len(ids) > 0 && q.Has("limit") {
			httpjson.Error(w, r, log, apierr.Invalid("give id or limit, not both"))
			return
		}
		for _, id := range ids {
			if !deadID.MatchString(id) {
				httpjson.Error(w, r, log, apierr.Invalid("id must be a dead letter's id (<ms>-<seq>), got %q", id))
				return
			}
		}
		n, err := j.Replay(r.Context(), ids, limit)
		if err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("replayed %d, then: %s", n, err))
			return
		}
		httpjson.Write(w, http.StatusOK, map[string]int{"replayed": n})
	})
}

// handleDeadLetterDelete is DELETE /v1/deadletters/{id}: a dead letter
// given up for good.
func handleDeadLetterDelete(log *slog.Logger, j *Journal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := chi.URLParam(r, "id")
		if !deadID.MatchString(id) {
			httpjson.Error(w, r, log, apierr.Invalid("id must be a dead letter's id (<ms>-<seq>)"))
			return
		}
		n, err := j.Discard(r.Context(), []string{id})
		switch {
		case err != nil:
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
		case n == 0:
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.KeyNotFound, Msg: "no dead letter " + id})
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}
