package main

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/httpjson"
)

type campaignBody struct {
	CID string `json:"cid"`
	Campaign
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
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&camp); err != nil {
			httpjson.Error(w, r, log, apierr.Invalid("body must be JSON {\"winLimitHours\": N}: %s", err))
			return
		}
		if err := c.Validate(cid, camp); err != nil {
			httpjson.Error(w, r, log, err)
			return
		}
		if err := c.Put(r.Context(), cid, camp); err != nil {
			httpjson.Error(w, r, log, apierr.Unavailablef("redis: %s", err))
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
