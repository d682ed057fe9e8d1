package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// Campaign is a campaign's declaration (package campaign): its windows
// and caps.
type Campaign = campaign.Declaration

// Campaigns reads and writes campaigns in Redis, as the hash
// campaign:{<cid>}. Reads go through client-side caching, so a known
// campaign costs no round trip and a change made anywhere reaches every
// instance as soon as Redis invalidates the cached copy.
type Campaigns struct {
	rdb    rueidis.Client
	ttl    time.Duration
	schema func() *counting.Schema // the counter's limits, nil until known
}

func campaignKey(cid string) string { return campaign.Key(cid) }

// indexKey is a ZSet of every campaign's cid (score 0, so ordered by cid):
// what the admin API lists, a page at a time, without scanning Redis.
const indexKey = "campaign-index"

// Get returns the campaign and whether it exists, through client-side
// caching: the forwarder looks a campaign up for every notice.
func (c *Campaigns) Get(ctx context.Context, cid string) (Campaign, bool, error) {
	return c.parse(cid, c.rdb.DoCache(ctx, c.rdb.B().Hgetall().Key(campaignKey(cid)).Cache(), c.ttl))
}

// Read is Get straight from Redis: the admin API reads its own writes,
// before the cache's invalidation has arrived.
func (c *Campaigns) Read(ctx context.Context, cid string) (Campaign, bool, error) {
	return c.parse(cid, c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(campaignKey(cid)).Build()))
}

func (c *Campaigns) parse(cid string, r rueidis.RedisResult) (Campaign, bool, error) {
	m, err := r.AsStrMap()
	if err != nil {
		return Campaign{}, false, err
	}
	if len(m) == 0 {
		return Campaign{}, false, nil
	}
	// Parsed once per version of the hash: the forwarder looks a campaign
	// up for every notice.
	camp, err := campaign.ParseCached(cid, m)
	if err != nil {
		return Campaign{}, true, err
	}
	return *camp, true, nil
}

// Validate checks a campaign before it is stored: within the counter's
// maxWindowHours and maxPaceWindowSec when its schema is known (a campaign
// beyond them stored while the counter was away is served at the maximum).
func (c *Campaigns) Validate(cid string, camp Campaign) error {
	if !ids.ValidCID(cid) {
		return apierr.Invalid("cid must be %s", ids.CIDRule)
	}
	maxWindow, maxPace := math.MaxInt32, math.MaxInt32
	if c.schema != nil {
		if sch := c.schema(); sch != nil {
			maxWindow, maxPace = sch.MaxWindowHours, sch.MaxPaceWindowSec
		}
	}
	if camp.WinLimitHours < 0 || camp.WinLimitHours > maxWindow {
		return apierr.Invalid("winLimitHours must be between 0 and %d (the counter's COUNTER_MAX_WINDOW_HOURS)", maxWindow)
	}
	if camp.PaceWindowSec < 0 || camp.PaceWindowSec > maxPace {
		return apierr.Invalid("paceWindowSec must be between 0 and %d (the counter's COUNTER_MAX_PACE_WINDOW_SEC)", maxPace)
	}
	b := campaign.CapBounds{MaxHours: maxWindow, MaxSliding: maxPace}
	if c.schema != nil {
		if sch := c.schema(); sch != nil {
			b.Events, b.Dimensions = sch.Events, sch.Dimensions
		}
	}
	return camp.Check(b)
}

// Put stores a campaign, and what its caps at the advertiser and io
// levels need in its parents' indexes (checked against what the other
// campaigns of those parents declared there).
func (c *Campaigns) Put(ctx context.Context, cid string, camp Campaign) error {
	if err := c.Validate(cid, camp); err != nil {
		return err
	}
	old, known, err := c.Read(ctx, cid)
	if err != nil && !known {
		return err
	}
	if err := c.checkSiblings(ctx, cid, &camp); err != nil {
		return err
	}
	f := camp.Fields()
	fv := c.rdb.B().Hset().Key(campaignKey(cid)).FieldValue()
	for i := 0; i < len(f); i += 2 {
		fv = fv.FieldValue(f[i], f[i+1])
	}
	if err := c.rdb.Do(ctx, fv.Build()).Error(); err != nil {
		return err
	}
	if err := c.indexParents(ctx, cid, &old, &camp); err != nil {
		return err
	}
	return c.index(ctx, cid)
}

// index lists cid in the index (a different slot from the campaign on a
// Cluster: a listing checks each campaign, and a PUT repairs a missing
// entry).
func (c *Campaigns) index(ctx context.Context, cid string) error {
	return c.rdb.Do(ctx, c.rdb.B().Zadd().Key(indexKey).ScoreMember().ScoreMember(0, cid).Build()).Error()
}

// List returns up to limit campaigns with cids after `after`, in cid
// order, and the cid to pass as after for the next page ("" at the end).
// An indexed campaign that no longer exists is dropped from the index.
func (c *Campaigns) List(ctx context.Context, after string, limit int) ([]campaignBody, string, error) {
	from := "-"
	if after != "" {
		from = "(" + after
	}
	cids, err := c.rdb.Do(ctx, c.rdb.B().Zrange().Key(indexKey).Min(from).Max("+").Bylex().Limit(0, int64(limit)).Build()).AsStrSlice()
	if err != nil {
		return nil, "", err
	}
	cmds := make(rueidis.Commands, len(cids))
	for i, cid := range cids {
		cmds[i] = c.rdb.B().Hgetall().Key(campaignKey(cid)).Build()
	}
	out := make([]campaignBody, 0, len(cids))
	for i, r := range c.rdb.DoMulti(ctx, cmds...) {
		camp, ok, err := c.parse(cids[i], r)
		switch {
		case err != nil && !ok:
			return nil, "", err
		case !ok:
			_ = c.rdb.Do(ctx, c.rdb.B().Zrem().Key(indexKey).Member(cids[i]).Build()).Error()
			continue
		}
		b := campaignBody{CID: cids[i], Campaign: camp}
		if err != nil {
			b.Error = err.Error()
		}
		out = append(out, b)
	}
	next := ""
	if len(cids) == limit {
		next = cids[len(cids)-1]
	}
	return out, next, nil
}

// Delete removes a campaign and reports whether it existed.
func (c *Campaigns) Delete(ctx context.Context, cid string) (bool, error) {
	old, known, err := c.Read(ctx, cid)
	if err != nil && !known {
		return false, err
	}
	n, err := c.rdb.Do(ctx, c.rdb.B().Del().Key(campaignKey(cid)).Build()).AsInt64()
	if err != nil {
		return false, err
	}
	if err := c.indexParents(ctx, cid, &old, &Campaign{}); err != nil {
		return false, err
	}
	return n > 0, c.rdb.Do(ctx, c.rdb.B().Zrem().Key(indexKey).Member(cid).Build()).Error()
}

// campaignFileEntry is one element of CALLBACK_CAMPAIGNS_FILE, a JSON array.
type campaignFileEntry struct {
	CID string `json:"cid"`
	Campaign
}

// seedScript stores a campaign unless it exists: KEYS[1] campaign key,
// ARGV its field value pairs; returns 1 when it stored it.
var seedScript = rueidis.NewLuaScript(`#!lua
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1`)

// LoadFile seeds the campaigns of a JSON file [{"cid":"42","winLimitHours":3},
// ...]: each is stored unless Redis has it already, so what the admin API
// changed survives a restart. The file is decoded strictly (an unknown
// field is an error, as the admin PUT refuses it) and checked whole before
// anything is stored. It returns how many campaigns were stored and how
// many were already there.
func (c *Campaigns) LoadFile(ctx context.Context, path string) (stored, kept int, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE: %w", err)
	}
	var entries []campaignFileEntry
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return 0, 0, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE %s: %w", path, err)
	}
	if dec.More() {
		return 0, 0, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE %s: data after the array", path)
	}
	seen := make(map[string]bool, len(entries))
	for i, e := range entries {
		if err := c.Validate(e.CID, e.Campaign); err != nil {
			return 0, 0, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE %s: entry %d: %w", path, i, err)
		}
		if seen[e.CID] {
			return 0, 0, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE %s: entry %d: campaign %s is listed twice", path, i, e.CID)
		}
		seen[e.CID] = true
	}
	for _, e := range entries {
		if err := c.checkSiblings(ctx, e.CID, &e.Campaign); err != nil {
			return stored, kept, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE %s: campaign %s: %w", path, e.CID, err)
		}
		n, err := seedScript.Exec(ctx, c.rdb, []string{campaignKey(e.CID)}, e.Campaign.Fields()).AsInt64()
		if err != nil {
			return stored, kept, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE: store campaign %s: %w", e.CID, err)
		}
		if n == 1 {
			stored++
			if err := c.indexParents(ctx, e.CID, &Campaign{}, &e.Campaign); err != nil {
				return stored, kept, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE: index campaign %s: %w", e.CID, err)
			}
		} else {
			kept++
		}
		if err := c.index(ctx, e.CID); err != nil {
			return stored, kept, fmt.Errorf("CALLBACK_CAMPAIGNS_FILE: index campaign %s: %w", e.CID, err)
		}
	}
	return stored, kept, nil
}

// Ping reports whether Redis answers.
func (c *Campaigns) Ping(ctx context.Context) error {
	return c.rdb.Do(ctx, c.rdb.B().Ping().Build()).Error()
}
