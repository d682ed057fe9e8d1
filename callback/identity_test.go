package main

import (
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// decideIDs asks /v1/decide with the given identities.
func (s *stack) decideIDs(ids map[string]string, cands ...counting.Candidate) []counting.Verdict {
	s.t.Helper()
	return s.decideWith(counting.DecideRequest{Identities: ids, Candidates: cands})
}

// A campaign caps a request under the first of its identity types the
// request carries, by that type's caps only: one with only ip_ua (the
// client's keyed hash) is capped by the stricter ip_ua cap, one with a
// device by the device's caps even when its ip_ua is spent, and one with
// no identity follows the campaign's noIdentity.
func TestIdentityFallback(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	for cid, body := range map[string]string{
		"id1": `{"identities":["device","ip_ua"],"noIdentity":"nobid","caps":[
			{"event":"win","dim":"device","window":{"unit":"day","n":1},"limit":3},
			{"event":"win","dim":"ip_ua","window":{"unit":"day","n":1},"limit":1}]}`,
		"id2": `{"identities":["device","ip_ua"],"caps":[{"event":"win","dim":"device","window":{"unit":"day","n":1},"limit":3}]}`,
	} {
		if code, _, got := s.do("PUT", admin+cid, body); code != 200 {
			t.Fatalf("PUT %s: %d %s", cid, code, got)
		}
	}
	for body, want := range map[string]string{
		`{"identities":["device","email"]}`: "identities[1]",
		`{"noIdentity":"maybe"}`:            "noIdentity",
	} {
		if code, _, got := s.do("PUT", admin+"id3", body); code != 400 || !strings.Contains(got, want) {
			t.Errorf("PUT %s: %d %s, want 400 naming %s", body, code, got, want)
		}
	}
	iu := client.IPUA([]byte("operator-key"), "203.0.113.7", "Mozilla/5.0")
	s.notice("/win?cid=id1&ip_ua=" + iu + "&eid=w-1")
	s.waitKey("freq:{win:ip_ua:id1:"+iu+"}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	c1, c2 := counting.Candidate{CID: "id1"}, counting.Candidate{CID: "id2"}
	got := s.decideIDs(map[string]string{"ip_ua": iu}, c1, c2)
	if v := got[0]; v.Allowed || v.Cap == nil || v.Cap.Dim != "ip_ua" || v.Count != 1 {
		t.Errorf("only ip_ua, its cap reached: %+v (cap %+v), want blocked by the ip_ua cap", v, v.Cap)
	}
	if !got[1].Allowed {
		t.Errorf("id2 has no ip_ua cap: %+v", got[1])
	}
	// With a device, the device's caps decide: the spent ip_ua cap does not.
	if v := s.decideIDs(map[string]string{"device": "d", "ip_ua": iu}, c1)[0]; !v.Allowed {
		t.Errorf("device and a spent ip_ua: %+v, want allowed by the device's caps", v)
	}
	got = s.decideIDs(map[string]string{"bundle": "com.example"}, c1, c2)
	if v := got[0]; v.Allowed || v.Reason != "no_identity" {
		t.Errorf("no identity on a nobid campaign: %+v, want blocked, no_identity", v)
	}
	if v := got[1]; !v.Allowed {
		t.Errorf("no identity on a bid campaign: %+v, want allowed", v)
	}
}
