package main

import (
	"context"
	"encoding/json"

	"github.com/redis/rueidis"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/apierr"
)

// The caps at a parent level (advertiser, io) are shared by the campaigns
// of that parent: a notice of any of them must be counted there in what
// any of them declared. Each parent has an index, the hash
// capneeds:{<level>=<id>}: field a campaign's cid, value the JSON of what
// that campaign's caps at the level need (campaign.Needs) and its time
// zone (parentEntry), kept by the admin API on every PUT and DELETE. The
// forwarder counts a notice at the parent in the union of the index's
// needs, in its zone, read through client-side caching like the campaigns.

// parentLevels are the levels whose counters campaigns share.
var parentLevels = []string{campaign.LevelAdvertiser, campaign.LevelIO}

func parentKey(level, id string) string { return "capneeds:{" + level + "=" + id + "}" }

// parentEntry is one campaign's entry in a parent's index.
type parentEntry struct {
	Timezone string                   `json:"timezone,omitempty"`
	Needs    map[string]campaign.Need `json:"needs"`
}

// parentNeeds are what a parent's campaigns need, by event, and the zone
// of its natural periods.
type parentNeeds struct {
	timezone string
	needs    map[string]campaign.Need
}

// indexParents moves campaign cid's needs from old's parents' indexes to
// cur's.
func (c *Campaigns) indexParents(ctx context.Context, cid string, old, cur *Campaign) error {
	var cmds rueidis.Commands
	for _, l := range parentLevels {
		was, now := old.LevelID(l, cid, ""), cur.LevelID(l, cid, "")
		if was != "" && was != now {
			cmds = append(cmds, c.rdb.B().Hdel().Key(parentKey(l, was)).Field(cid).Build())
		}
		if now == "" {
			continue
		}
		needs := campaign.Needs(cur.Caps, l)
		if len(needs) == 0 {
			cmds = append(cmds, c.rdb.B().Hdel().Key(parentKey(l, now)).Field(cid).Build())
			continue
		}
		b, err := json.Marshal(parentEntry{Timezone: cur.Timezone, Needs: needs})
		if err != nil {
			return err
		}
		cmds = append(cmds, c.rdb.B().Hset().Key(parentKey(l, now)).FieldValue().FieldValue(cid, string(b)).Build())
	}
	for _, r := range c.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return err
		}
	}
	return nil
}

// checkSiblings refuses caps at a parent level whose exact window differs
// from the one another campaign of that parent declared for the same
// event: one exact window is recorded per level and event.
func (c *Campaigns) checkSiblings(ctx context.Context, cid string, camp *Campaign) error {
	for _, l := range parentLevels {
		id := camp.LevelID(l, cid, "")
		mine := campaign.Needs(camp.Caps, l)
		if id == "" || len(mine) == 0 {
			continue
		}
		m, err := c.rdb.Do(ctx, c.rdb.B().Hgetall().Key(parentKey(l, id)).Build()).AsStrMap()
		if err != nil {
			return err
		}
		for other, v := range m {
			var theirs parentEntry
			if other == cid || json.Unmarshal([]byte(v), &theirs) != nil {
				continue
			}
			if theirs.Timezone != camp.Timezone {
				return apierr.Invalid("timezone: campaign %s of %s %s counts that level's natural periods in %q, this one in %q: one zone per %s",
					other, l, id, zoneName(theirs.Timezone), zoneName(camp.Timezone), l)
			}
			for ev, n := range mine {
				o := theirs.Needs[ev]
				if n.PaceSec == 0 || o.PaceSec == 0 || n.PaceSec == o.PaceSec {
					continue
				}
				return apierr.Invalid("caps[%d].window: campaign %s of %s %s has an exact window of %d s for %s at that level, this one %d s: one exact window per level and event",
					exactCap(camp, l, ev), other, l, id, o.PaceSec, ev, n.PaceSec)
			}
		}
	}
	return nil
}

// zoneName names a declared zone, the counter's when empty.
func zoneName(tz string) string {
	if tz == "" {
		return "the counter's COUNTER_TIMEZONE"
	}
	return tz
}

// exactCap is the index of camp's cap with an exact window at level for event.
func exactCap(camp *Campaign, level, event string) int {
	for i, cp := range camp.Caps {
		if cp.Level == level && cp.Event == event && campaign.Needs(camp.Caps[i:i+1], level)[event].PaceSec > 0 {
			return i
		}
	}
	return 0
}

// ParentNeed is what a notice of event must be counted in at a parent:
// the union of what every campaign there declared, and the parent's zone.
func (c *Campaigns) ParentNeed(ctx context.Context, level, id, event string) (campaign.Need, string, error) {
	key := parentKey(level, id)
	m, err := c.rdb.DoCache(ctx, c.rdb.B().Hgetall().Key(key).Cache(), c.ttl).AsStrMap()
	if err != nil {
		return campaign.Need{}, "", err
	}
	u, _ := unions.Get(key, m, union)
	return u.needs[event], u.timezone, nil
}

// unions are the parents' indexes unioned by event, with the hash each
// came from: the forwarder asks for every notice, an index changes
// seldom.
var unions = campaign.NewHashCache[parentNeeds](1 << 16)

// union is what the campaigns of one parent's index need, by event, and
// their zone (one per parent: checkSiblings).
func union(m map[string]string) (parentNeeds, error) {
	out := parentNeeds{needs: map[string]campaign.Need{}}
	for _, v := range m {
		var e parentEntry
		if json.Unmarshal([]byte(v), &e) != nil {
			continue
		}
		out.timezone = e.Timezone
		for ev, n := range e.Needs {
			out.needs[ev] = out.needs[ev].Union(n)
		}
	}
	return out, nil
}
