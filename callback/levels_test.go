package main

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// decide asks the counter's POST /v1/decide for device dev.
func (s *stack) decide(dev string, cands ...counting.Candidate) []counting.Verdict {
	s.t.Helper()
	return s.decideWith(counting.DecideRequest{Identities: map[string]string{"device": dev}, Candidates: cands})
}

// decideWith asks the counter's POST /v1/decide.
func (s *stack) decideWith(req counting.DecideRequest) []counting.Verdict {
	s.t.Helper()
	cands := req.Candidates
	b, _ := json.Marshal(req)
	code, _, body := s.do("POST", "http://"+s.counterAddr+"/v1/decide", string(b))
	var resp counting.DecideResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil || code != 200 || len(resp.Results) != len(cands) {
		s.t.Fatalf("decide: %d %s", code, body)
	}
	return resp.Results
}

// notice sends one notice to the public listener.
func (s *stack) notice(path string) {
	s.t.Helper()
	if code, _, body := s.do("GET", "http://"+s.public+path, ""); code >= 300 {
		s.t.Fatalf("GET %s: %d %s", path, code, body)
	}
}

// Caps at every level: an advertiser cap counts the notices of all its
// campaigns (even one that declares no advertiser cap) and blocks the
// campaigns that declare it; a creative cap blocks only that creative; a
// resent notice counts once at every level; the strictest blocking cap is
// the one named.
func TestCapsAtEveryLevel(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	advCap := `{"level":"advertiser","event":"win","window":{"unit":"day","n":1},"limit":2}`
	for cid, body := range map[string]string{
		"lv1": `{"advertiser":"acme","io":"io1","caps":[` + advCap + `,
			{"level":"creative","event":"imp","window":{"unit":"hours","n":24},"limit":1},
			{"level":"io","event":"win","window":{"unit":"week","n":1},"limit":50}]}`,
		"lv2": `{"advertiser":"acme","caps":[` + advCap + `,{"level":"campaign","event":"win","window":{"unit":"hours","n":3},"limit":1}]}`,
		"lv3": `{"advertiser":"acme","caps":[{"level":"campaign","event":"win","window":{"unit":"day","n":1},"limit":9}]}`,
	} {
		if code, _, got := s.do("PUT", admin+cid, body); code != 200 {
			t.Fatalf("PUT %s: %d %s", cid, code, got)
		}
	}
	c1, c2 := counting.Candidate{CID: "lv1", CRID: "cr1"}, counting.Candidate{CID: "lv1", CRID: "cr2"}
	for _, v := range s.decide("d", c1, c2, counting.Candidate{CID: "lv2"}) {
		if !v.Allowed || v.Code != 0 {
			t.Fatalf("before any notice: %+v", v)
		}
	}
	// An impression of creative cr1 blocks cr1, not cr2.
	s.notice("/imp?cid=lv1&crid=cr1&device=d&eid=i1")
	s.waitKey("freq:{imp:device:creative=cr1:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	got := s.decide("d", c1, c2)
	if got[0].Allowed || got[0].Cap == nil || got[0].Cap.Level != "creative" || got[0].CRID != "cr1" || got[0].Count != 1 {
		t.Errorf("cr1 after its impression: %+v, want blocked by the creative cap", got[0])
	}
	if !got[1].Allowed {
		t.Errorf("cr2 after cr1's impression: %+v, want allowed", got[1])
	}
	// Wins of lv1 and of lv3 (which declares no advertiser cap) both count
	// at acme, lv1's at its io too; a resend counts once.
	s.notice("/win?cid=lv1&device=d&eid=w1")
	s.notice("/win?cid=lv3&device=d&eid=w3")
	s.notice("/win?cid=lv1&device=d&eid=w1")
	s.waitKey("freq:{win:device:advertiser=acme:d}", 2, 10*time.Second)
	s.waitSettled(10 * time.Second)
	for key, want := range map[string]int64{"freq:{win:device:advertiser=acme:d}": 2, "freq:{win:device:io=io1:d}:week": 1,
		"freq:{win:device:lv1:d}": 1, "freq:{win:device:lv3:d}": 1} {
		if n := s.get(key); n != want {
			t.Errorf("%s = %d, want %d", key, n, want)
		}
	}
	// Notices count only where caps need them: no creative counter for a
	// win, no hour buckets at acme (its caps are days).
	for _, key := range []string{"freq:{win:device:creative=cr1:d}", "hfreq:{win:device:advertiser=acme:d}"} {
		if s.exists(key) {
			t.Errorf("%s exists: nothing caps it", key)
		}
	}
	got = s.decide("d", c2, counting.Candidate{CID: "lv2"}, counting.Candidate{CID: "lv3"})
	for i, v := range got[:2] {
		if v.Allowed || v.Cap == nil || v.Cap.Level != "advertiser" || v.Reason != "day_cap" || v.Count != 2 {
			t.Errorf("candidate %d after two wins of acme: %+v, want blocked by acme's day cap", i, v)
		}
	}
	if !got[2].Allowed {
		t.Errorf("lv3 declares no advertiser cap: %+v, want allowed", got[2])
	}
	// lv2's own win: its 3-hour cap (limit 1) and acme's day cap both
	// block; the day is the stricter and is named.
	s.notice("/win?cid=lv2&device=d&eid=w2")
	s.waitKey("freq:{win:device:lv2:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if v := s.decide("d", counting.Candidate{CID: "lv2"})[0]; v.Allowed || v.Cap.Level != "advertiser" || v.Count != 3 {
		t.Errorf("lv2 blocked by its 3-hour cap and acme's day: %+v (cap %+v), want acme's day named", v, v.Cap)
	}
	// Another device is not blocked anywhere.
	for _, v := range s.decide("other", c1, counting.Candidate{CID: "lv2"}) {
		if !v.Allowed {
			t.Errorf("another device: %+v", v)
		}
	}
}

// Caps at a parent level are checked against the other campaigns of the
// parent: one exact window per level and event. A campaign that changes
// advertiser leaves the old one's index.
func TestParentCapsAreCheckedAgainstSiblings(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	exact := func(adv string, n int) string {
		return `{"advertiser":"` + adv + `","caps":[{"level":"advertiser","event":"imp","window":{"unit":"minutes","n":` + strconv.Itoa(n) + `},"limit":1}]}`
	}
	if code, _, body := s.do("PUT", admin+"s1", exact("acme", 10)); code != 200 {
		t.Fatalf("PUT s1: %d %s", code, body)
	}
	if code, _, body := s.do("PUT", admin+"s2", exact("acme", 5)); code != 400 || !strings.Contains(body, "caps[0].window: campaign s1 of advertiser acme has an exact window of 600 s") {
		t.Errorf("PUT s2 with another exact window: %d %s, want 400 naming s1", code, body)
	}
	if code, _, body := s.do("GET", admin+"s2", ""); code != 404 {
		t.Errorf("refused s2 was stored: %d %s", code, body)
	}
	// s1 moves to another advertiser: acme is free for another length.
	if code, _, body := s.do("PUT", admin+"s1", exact("globex", 10)); code != 200 {
		t.Fatalf("PUT s1 to globex: %d %s", code, body)
	}
	if code, _, body := s.do("PUT", admin+"s2", exact("acme", 5)); code != 200 {
		t.Errorf("PUT s2 once s1 left acme: %d %s", code, body)
	}
	if code, _, _ := s.do("DELETE", admin+"s1", ""); code >= 300 {
		t.Fatalf("DELETE s1: %d", code)
	}
	if s.exists("capneeds:{advertiser=globex}") {
		t.Errorf("globex's index still holds the deleted s1")
	}
}

// A signed notice signs its creative: the creative counts, and a URL whose
// crid was changed (or added) is refused.
func TestSignedNoticesSignTheCreative(t *testing.T) {
	k1 := []byte("freqcap-k1-secret-0123")
	s := startStack(t, "CALLBACK_SIGNING_KEYS=k1:"+base64.StdEncoding.EncodeToString(k1))
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/sc",
		`{"caps":[{"level":"creative","event":"win","window":{"unit":"day","n":1},"limit":1}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	signer := client.NoticeSigner{CallbackURL: "http://" + s.public, KeyID: "k1", Secret: k1}
	n, err := signer.CreativeURLs("sc", "cr1", client.Identities{"device": "d"}, "req-1", "1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(n.Win, "crid=cr1") {
		t.Fatalf("signed URL without its creative: %s", n.Win)
	}
	plain, err := signer.URLs("sc", client.Identities{"device": "d"}, "req-2", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, forged := range []string{strings.Replace(n.Win, "crid=cr1", "crid=cr2", 1), strings.Replace(plain.Win, "cid=sc", "cid=sc&crid=cr2", 1)} {
		if code, _, body := s.do("GET", forged, ""); code != 403 {
			t.Errorf("GET %s: %d %s, want 403", forged, code, body)
		}
	}
	if code, _, body := s.do("GET", n.Win, ""); code != 204 {
		t.Fatalf("the signed notice: %d %s", code, body)
	}
	s.waitKey("freq:{win:device:creative=cr1:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if s.exists("freq:{win:device:creative=cr2:d}") {
		t.Error("a forged creative was counted")
	}
	if v := s.decide("d", counting.Candidate{CID: "sc", CRID: "cr1"}, counting.Candidate{CID: "sc", CRID: "cr2"}); v[0].Allowed || !v[1].Allowed {
		t.Errorf("after cr1's signed win: %+v, want cr1 blocked and cr2 allowed", v)
	}
}

// A campaign's natural periods are in its own zone: its day counter ends
// at midnight there, not in the counter's zone (UTC here). The campaigns
// of one advertiser with caps there share a zone; an unknown zone is
// refused naming the field.
func TestCampaignTimezone(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	const zone = "Pacific/Kiritimati" // UTC+14: its midnight is never UTC's
	if code, _, body := s.do("PUT", admin+"tz1", `{"timezone":"`+zone+`","advertiser":"zz","caps":[
		{"event":"win","window":{"unit":"day","n":1},"limit":5},
		{"level":"advertiser","event":"win","window":{"unit":"week","n":1},"limit":50}]}`); code != 200 {
		t.Fatalf("PUT tz1: %d %s", code, body)
	}
	s.notice("/win?cid=tz1&device=d&eid=tz-1")
	s.waitKey("freq:{win:device:tz1:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(loc)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, loc)
	days := 7 - (int(now.Weekday())+6)%7
	monday := time.Date(now.Year(), now.Month(), now.Day()+days, 0, 0, 0, 0, loc)
	for key, end := range map[string]time.Time{"freq:{win:device:tz1:d}": midnight, "freq:{win:device:advertiser=zz:d}:week": monday} {
		ms, err := s.rc.Do(t.Context(), s.rc.B().Pttl().Key(key).Build()).AsInt64()
		if want := time.Until(end).Milliseconds(); err != nil || ms < want-5000 || ms > want+1000 {
			t.Errorf("PTTL %s = %d ms (%v), want about %d: the end of the period in %s", key, ms, err, want, zone)
		}
	}
	if v := s.decide("d", counting.Candidate{CID: "tz1"})[0]; !v.Allowed || v.Code != 0 {
		t.Errorf("decide tz1: %+v", v)
	}
	for cid, body := range map[string]string{
		"tz2": `{"advertiser":"zz","caps":[{"level":"advertiser","event":"win","window":{"unit":"day","n":1},"limit":1}]}`,
		"tz3": `{"timezone":"Mars/Olympus_Mons"}`,
	} {
		if code, _, got := s.do("PUT", admin+cid, body); code != 400 || !strings.Contains(got, "timezone") {
			t.Errorf("PUT %s %s: %d %s, want 400 naming the timezone", cid, body, code, got)
		}
	}
	// Without caps at the advertiser, a campaign of zz may keep another zone.
	if code, _, got := s.do("PUT", admin+"tz4", `{"advertiser":"zz","timezone":"UTC","caps":[{"event":"win","window":{"unit":"day","n":1},"limit":1}]}`); code != 200 {
		t.Errorf("PUT tz4: %d %s", code, got)
	}
}

// A lifetime cap counts until the campaign's end: its counter lives until
// then, and it blocks once reached. It needs the end, and is a campaign's
// (or a creative's), not a parent's.
func TestLifetimeCaps(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	end := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	if code, _, body := s.do("PUT", admin+"lt", `{"end":"`+end.Format(time.RFC3339)+`","caps":[
		{"event":"win","window":{"unit":"lifetime"},"limit":2},
		{"event":"win","window":{"unit":"day","n":1},"limit":5}]}`); code != 200 {
		t.Fatalf("PUT lt: %d %s", code, body)
	}
	s.notice("/win?cid=lt&device=d&eid=lt-1")
	s.notice("/win?cid=lt&device=d&eid=lt-2")
	s.waitKey("freq:{win:device:lt:d}:lifetime", 2, 10*time.Second)
	s.waitSettled(10 * time.Second)
	ms, err := s.rc.Do(t.Context(), s.rc.B().Pttl().Key("freq:{win:device:lt:d}:lifetime").Build()).AsInt64()
	if want := time.Until(end).Milliseconds(); err != nil || ms < want-5000 || ms > want+1000 {
		t.Errorf("PTTL of the lifetime = %d ms (%v), want about %d: until the campaign's end", ms, err, want)
	}
	if v := s.decide("d", counting.Candidate{CID: "lt"})[0]; v.Allowed || v.Reason != "lifetime_cap" || v.Count != 2 {
		t.Errorf("after two wins: %+v, want blocked by the lifetime cap", v)
	}
	for body, want := range map[string]string{
		`{"caps":[{"event":"win","window":{"unit":"lifetime"},"limit":2}]}`:                                            "caps[0].window: a lifetime cap needs the campaign's end",
		`{"end":"next tuesday","caps":[]}`:                                                                             `end \"next tuesday\"`,
		`{"end":"2030-01-31","advertiser":"a","caps":[{"level":"advertiser","window":{"unit":"lifetime"},"limit":1}]}`: "caps[0].window: a lifetime is the campaign's",
	} {
		if code, _, got := s.do("PUT", admin+"lt", body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %q", body, code, got, want)
		}
	}
}

// A cap of "this day and the 2 before" counts in day buckets kept 3 days
// in the campaign's zone, and blocks once reached.
func TestCapsOfSeveralPeriods(t *testing.T) {
	s := startStack(t)
	if code, _, body := s.do("PUT", "http://"+s.admin+"/v1/campaigns/np", `{"timezone":"Asia/Tokyo","caps":[
		{"event":"imp","window":{"unit":"day","n":3},"limit":2},
		{"event":"imp","window":{"unit":"week","n":4},"limit":20}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, body)
	}
	s.notice("/imp?cid=np&device=d&eid=np-1")
	s.notice("/imp?cid=np&device=d&eid=np-2")
	s.waitKey("freq:{imp:device:np:d}", 2, 10*time.Second)
	s.waitSettled(10 * time.Second)
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	y, m, d := time.Now().In(tokyo).Date()
	today := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
	if n, err := s.rc.Do(t.Context(), s.rc.B().Hget().Key("pfreq:{imp:device:np:d}:days").Field(strconv.FormatInt(today, 10)).Build()).AsInt64(); err != nil || n != 2 {
		t.Errorf("today's bucket in Tokyo = %d (%v), want 2", n, err)
	}
	if ms, err := s.rc.Do(t.Context(), s.rc.B().Pttl().Key("pfreq:{imp:device:np:d}:weeks").Build()).AsInt64(); err != nil || ms < 21*86400_000 || ms > 28*86400_000 {
		t.Errorf("the week buckets live %d ms (%v), want the rest of this week and 3 more", ms, err)
	}
	v := s.decide("d", counting.Candidate{CID: "np"})[0]
	if v.Allowed || v.Reason != "day_cap" || v.Cap == nil || v.Cap.Window.N != 3 || v.Count != 2 {
		t.Errorf("after two impressions: %+v (cap %+v), want blocked by the 3-day cap", v, v.Cap)
	}
}
