package main

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/freqcap/freqcap/client"
	"github.com/freqcap/freqcap/shared/counting"
)

// A conversion suppresses: once a device converts, the campaign that
// declares a conversion suppression is blocked for the window, and, at the
// advertiser level, every campaign of the advertiser that declares it; the
// suppression is named before a frequency cap that also blocks. Other
// devices are not suppressed.
func TestAConversionSuppresses(t *testing.T) {
	s := startStack(t)
	admin := "http://" + s.admin + "/v1/campaigns/"
	for cid, body := range map[string]string{
		"su1": `{"advertiser":"shop","caps":[
			{"event":"conv","window":{"unit":"day","n":30},"limit":1,"then":"block"},
			{"event":"win","window":{"unit":"day","n":1},"limit":1}]}`,
		"su2": `{"advertiser":"shop","caps":[{"level":"advertiser","event":"conv","window":{"unit":"day","n":30},"limit":1,"then":"block"}]}`,
		"su3": `{"advertiser":"shop","caps":[{"event":"win","window":{"unit":"day","n":1},"limit":5}]}`,
	} {
		if code, _, got := s.do("PUT", admin+cid, body); code != 200 {
			t.Fatalf("PUT %s: %d %s", cid, code, got)
		}
	}
	if code, _, got := s.do("PUT", admin+"su4", `{"caps":[{"event":"conv","window":{"unit":"day","n":30},"limit":1,"then":"nothing"}]}`); code != 400 || !strings.Contains(got, "caps[0].then") {
		t.Errorf("a cap with another then: %d %s, want 400 naming caps[0].then", code, got)
	}
	s.notice("/win?cid=su1&device=d&eid=w-1")
	s.notice("/conv?cid=su1&device=d&eid=c-1")
	s.waitKey("freq:{conv:device:advertiser=shop:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	got := s.decide("d", counting.Candidate{CID: "su1"}, counting.Candidate{CID: "su2"}, counting.Candidate{CID: "su3"})
	if v := got[0]; v.Allowed || v.Reason != "suppressed" || v.Cap == nil || v.Cap.Event != "conv" || v.Cap.Level != "campaign" {
		t.Errorf("su1 after its conversion: %+v (cap %+v), want suppressed by its own cap, named before its day cap", v, v.Cap)
	}
	if v := got[1]; v.Allowed || v.Reason != "suppressed" || v.Cap == nil || v.Cap.Level != "advertiser" {
		t.Errorf("su2 after a conversion on su1: %+v (cap %+v), want suppressed at shop's level", v, v.Cap)
	}
	if !got[2].Allowed {
		t.Errorf("su3 declares no suppression: %+v", got[2])
	}
	for _, v := range s.decide("other", counting.Candidate{CID: "su1"}, counting.Candidate{CID: "su2"}) {
		if !v.Allowed {
			t.Errorf("another device: %+v", v)
		}
	}
}

// A signed click tracker counts the click and sends the browser to the
// landing page it signed; a changed landing page is refused.
func TestASignedClickSendsTheBrowserOn(t *testing.T) {
	k1 := []byte("freqcap-k1-secret-0123")
	s := startStack(t, "CALLBACK_SIGNING_KEYS=k1:"+base64.StdEncoding.EncodeToString(k1))
	if code, _, got := s.do("PUT", "http://"+s.admin+"/v1/campaigns/ck", `{"caps":[{"event":"click","window":{"unit":"day","n":1},"limit":1,"then":"block"}]}`); code != 200 {
		t.Fatalf("PUT: %d %s", code, got)
	}
	signer := client.NoticeSigner{CallbackURL: "http://" + s.public, KeyID: "k1", Secret: k1}
	u, err := signer.ClickThrough("ck", "", client.Identities{"device": "d"}, "req-1", "1", "https://shop.example/landing?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signer.ClickThrough("ck", "", client.Identities{"device": "d"}, "req-1", "1", "javascript:alert(1)"); err == nil {
		t.Error("ClickThrough took a javascript: landing page")
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "https://shop.example/landing?x=1" {
		t.Errorf("click: %d to %q, want 302 to the landing page", resp.StatusCode, resp.Header.Get("Location"))
	}
	forged := strings.Replace(u, "shop.example", "evil.example", 1)
	if resp, err := noFollow.Get(forged); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a click with another landing page: %v %v, want 403", resp.StatusCode, err)
	}
	s.waitKey("freq:{click:device:ck:d}", 1, 10*time.Second)
	s.waitSettled(10 * time.Second)
	if v := s.decide("d", counting.Candidate{CID: "ck"})[0]; v.Allowed || v.Reason != "suppressed" {
		t.Errorf("after the click: %+v, want suppressed", v)
	}
}
