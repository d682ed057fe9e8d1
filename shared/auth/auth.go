// Package auth authenticates the services to each other: bearer tokens
// (several at once, for rotation) on an API, compared in constant time.
package auth

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/config"
	"github.com/freqcap/freqcap/shared/httpjson"
)

// Tokens parses a comma-separated list of tokens (COUNTER_AUTH_TOKENS,
// CALLBACK_ADMIN_TOKENS); each must be 16 characters or more.
func Tokens(variable, s string) ([]string, error) {
	tokens := config.List(s)
	for _, t := range tokens {
		if len(t) < 16 {
			return nil, fmt.Errorf("%s: a token of %d characters; want at least 16", variable, len(t))
		}
	}
	return tokens, nil
}

// Bearer lets a request through to next only with "Authorization: Bearer
// <one of tokens>"; paths open answers without one (health checks). No
// tokens: every request goes through.
func Bearer(tokens []string, open func(path string) bool, next http.Handler) http.Handler {
	if len(tokens) == 0 {
		return next
	}
	want := make([][]byte, len(tokens))
	for i, t := range tokens {
		want[i] = []byte(t)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if open != nil && open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		match := 0
		for _, t := range want {
			// Every token is compared: the time says nothing of which matched.
			match |= subtle.ConstantTimeCompare([]byte(got), t)
		}
		if !ok || match != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="freqcap"`)
			httpjson.Write(w, http.StatusUnauthorized, httpjson.Body{Code: apierr.InvalidArgument, Msg: "missing or unknown bearer token (Authorization: Bearer <token>)"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Transport adds "Authorization: Bearer token" to every request base
// sends (http.DefaultTransport when nil); no token: base as it is.
func Transport(token string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if token == "" {
		return base
	}
	return &bearerTransport{token: "Bearer " + token, base: base}
}

type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", t.token)
	return t.base.RoundTrip(r)
}
