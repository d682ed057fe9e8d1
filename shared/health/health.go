// Package health serves liveness and readiness probes.
package health

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/httpjson"
)

var ok = httpjson.Body{Code: apierr.OK, Msg: "ok"}

// Live answers 200 while the process runs.
func Live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpjson.Write(w, http.StatusOK, ok)
	})
}

// Ready answers 200 when ping succeeds within a second, 503 otherwise.
func Ready(log *slog.Logger, what string, ping func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := ping(ctx); err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("%s: %s", what, err))
			return
		}
		httpjson.Write(w, http.StatusOK, ok)
	})
}
