package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/core"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/deadline"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// handleItems serves the counting core as it is: POST /v1/items with a
// counting.Request, all reads (hits 0: within the read deadline, failing
// open per item) or all writes (hits > 0: per-item codes, never degraded),
// answered by a counting.Response in item order.
func handleItems(log *slog.Logger, lim *core.Limits, store *core.Store, deg *degrader, maxItems int, writeTimeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req counting.Request
		if err := decodeBatch(w, r, &req, func() int { return len(req.Items) }, maxItems); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		write := req.Items[0].Hits > 0
		for i := range req.Items {
			it := &req.Items[i]
			if (it.Hits > 0) != write {
				httpjson.Error(w, r, log, apierr.Invalid("%shits: a batch is all reads (hits 0) or all writes (hits > 0)", campaign.ItemPlace(i)))
				return
			}
			// The item's place is named only for an item refused.
			if err := lim.Check(it, write, ""); err != nil {
				httpjson.Error(w, r, log, lim.Check(it, write, campaign.ItemPlace(i)))
				return
			}
		}
		var res []counting.Result
		if write {
			ctx, cancel := deadline.Within(r.Context(), writeTimeout)
			res = store.Write(ctx, req.Items)
			cancel()
		} else {
			res = store.Read(r.Context(), req.Items)
			for i := range res {
				if res[i].Degraded {
					deg.count(r, res[i].Code, res[i].Msg)
				}
			}
		}
		httpjson.Write(w, http.StatusOK, counting.Response{Results: res})
	})
}
