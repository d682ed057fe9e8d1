package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/httpjson"
	"github.com/freqcap/freqcap/shared/ids"
)

type campaignBody struct {
	CID string `json:"cid"`
	Campaign
	// Error says why a stored campaign could not be read (a listing
	// shows it rather than fail whole).
	Error string `json:"error,omitempty"`
}

func handleCampaignGet(log *slog.Logger, c *Campaigns) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cid := chi.URLParam(r, "cid")
		camp, ok, err := c.Read(r.Context(), cid)
		switch {
		case err != nil && ok:
			// Stored, but not readable (edited by hand): say so rather
			// than answer zeros.
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.Internal, Msg: err.Error()})
			return
		case err != nil:
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
			return
		}
		if !ok {
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.KeyNotFound, Msg: "campaign " + cid + " not found"})
			return
		}
		httpjson.Write(w, http.StatusOK, campaignBody{CID: cid, Campaign: camp})
	})
}

func handleCampaignPut(log *slog.Logger, c *Campaigns) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cid := chi.URLParam(r, "cid")
		var camp Campaign
		if err := httpjson.RequireJSON(r); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
		if err == nil {
			err = httpjson.Unmarshal(body, &camp, `{"winLimitHours": N, "paceWindowSec": S}`)
		}
		if err != nil {
			httpjson.Error(w, r, log, apierr.Invalid("%s", err))
			return
		}
		if err := c.Validate(cid, camp); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		if err := c.Put(r.Context(), cid, camp); err != nil {
			if apierr.CodeOf(err) != apierr.InvalidArgument {
				err = apierr.Unavailablef("redis: %s", err)
			}
			httpjson.Error(w, r, log, err)
			return
		}
		httpjson.Write(w, http.StatusOK, campaignBody{CID: cid, Campaign: camp})
	})
}

func handleCampaignDelete(log *slog.Logger, c *Campaigns) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cid := chi.URLParam(r, "cid")
		existed, err := c.Delete(r.Context(), cid)
		if err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
			return
		}
		if !existed {
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.KeyNotFound, Msg: "campaign " + cid + " not found"})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// maxListLimit bounds one page of the campaign listing.
const maxListLimit = 1000

// handleCampaignList is GET /v1/campaigns?after=<cid>&limit=<n>: a page of
// campaigns in cid order (limit 100 by default, at most 1000), and the
// after of the next page while there are more.
func handleCampaignList(log *slog.Logger, c *Campaigns) http.Handler {
	type page struct {
		Campaigns []campaignBody `json:"campaigns"`
		Next      string         `json:"next,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := httpjson.Query(r)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		limit := 100
		if v := q.Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxListLimit {
				httpjson.Error(w, r, log, apierr.Invalid("limit must be a whole number between 1 and %d", maxListLimit))
				return
			}
			limit = n
		}
		after := q.Get("after")
		if after != "" && !ids.ValidCID(after) {
			httpjson.Error(w, r, log, apierr.Invalid("after must be a cid (%s)", ids.CIDRule))
			return
		}
		list, next, err := c.List(r.Context(), after, limit)
		if err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
			return
		}
		httpjson.Write(w, http.StatusOK, page{Campaigns: list, Next: next})
	})
}

// handleCampaignCounts is GET /v1/campaigns/{cid}/counts?device=X[&bundle=Y]:
// what an operator asks about one device (or bundle, tagid) in one
// campaign: the campaign's settings and, for every event the counter
// counts, the day, the hour window and the exact window the campaign
// counts that event in, as the counter has them. One counter read; nothing is scanned.
func handleCampaignCounts(log *slog.Logger, c *Campaigns, schema *Schema, counter *url.URL, token string) http.Handler {
	client := &http.Client{Timeout: 2 * time.Second, Transport: auth.Transport(token, nil)}
	batchURL := counter.JoinPath("/v1/freq/batch").String()
	type answer struct {
		CID      string                     `json:"cid"`
		Campaign Campaign                   `json:"campaign"`
		Events   map[string]counting.Answer `json:"events"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cid := chi.URLParam(r, "cid")
		camp, ok, err := c.Read(r.Context(), cid)
		switch {
		case err != nil:
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
			return
		case !ok:
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.KeyNotFound, Msg: "campaign " + cid + " not found"})
			return
		}
		sch, err := schema.Need(r.Context())
		if err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("counter schema: %s", err))
			return
		}
		query, err := httpjson.Query(r)
		if err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		dims := map[string]string{}
		for name, vs := range query {
			if !slices.Contains(sch.Dimensions, name) || len(vs) != 1 {
				httpjson.Error(w, r, log, apierr.Invalid("parameter %q: give each of the dimensions (%s) at most once", name, strings.Join(sch.Dimensions, ", ")))
				return
			}
			dims[name] = vs[0]
		}
		if len(dims) == 0 {
			httpjson.Error(w, r, log, apierr.Invalid("at least one dimension is required (%s)", strings.Join(sch.Dimensions, ", ")))
			return
		}
		req := countsRequest(cid, camp, sch, dims)
		var res counting.BatchResponse
		if code, err := postJSON(r.Context(), client, batchURL, req, &res); err != nil {
			httpjson.Error(w, r, log, &apierr.Error{Code: apierr.Unavailable, Msg: "counter: " + err.Error()})
			return
		} else if code != http.StatusOK || len(res.Results) != len(req.Items) {
			httpjson.Error(w, r, log, &apierr.Error{Code: res.Code, Msg: "counter: " + res.Msg})
			return
		}
		a := answer{CID: cid, Campaign: camp, Events: make(map[string]counting.Answer, len(res.Results))}
		for i, ev := range sch.Events {
			a.Events[ev] = res.Results[i]
		}
		httpjson.Write(w, http.StatusOK, a)
	})
}

// countsRequest reads, for every event, what the campaign counts its
// notices in: the day, the hour window and the exact window its
// winLimitHours, paceWindowSec and declared caps need.
func countsRequest(cid string, camp Campaign, sch *counting.Schema, dims map[string]string) counting.BatchRequest {
	req := counting.BatchRequest{}
	for _, ev := range sch.Events {
		need := camp.Need(ev)
		it := counting.BatchItem{CID: cid, Event: ev, Dims: dims, PaceWindowSec: min(need.PaceSec, sch.MaxPaceWindowSec), Week: need.Week, Month: need.Month, Zone: camp.Timezone, Periods: need.PeriodList()}
		if need.Lifetime {
			it.LifetimeEnd, _ = camp.EndUnix()
		}
		if need.Hours > 0 {
			it.WindowHours = []int{min(need.Hours, sch.MaxWindowHours)}
		}
		req.Items = append(req.Items, it)
	}
	return req
}

// postJSON posts v as JSON and decodes the answer into out.
func postJSON(ctx context.Context, c *http.Client, url string, v, out any) (int, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(out)
}
