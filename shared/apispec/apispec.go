// Package apispec holds a service's routes to its OpenAPI description
// (openapi/*.yaml): tests load the file, validate it, and compare its
// operations with the routes the service's router really serves.
package apispec

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
)

// Load reads and validates an OpenAPI description.
func Load(path string) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// Operations lists "METHOD /path" of every operation of doc.
func Operations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// wildcard is a chi pattern's catch-all, such as /debug/* or a Connect
// service's /freqcap.v1.RateLimiter/*.
var wildcard = regexp.MustCompile(`/\*$`)

// Routes lists "METHOD /path" of every route r serves, with chi's {param}
// patterns as OpenAPI writes them; catch-all mounts (profilers, RPC
// services) are left out, since proto/ and pprof describe those.
func Routes(r chi.Routes) ([]string, error) {
	var out []string
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		if route == "" || wildcard.MatchString(route) || strings.HasSuffix(route, "*") || strings.HasPrefix(route, "/debug") {
			return nil
		}
		out = append(out, method+" "+route)
		return nil
	})
	slices.Sort(out)
	return slices.Compact(out), err
}

// Diff says which routes the description lacks and which operations it
// has that no route serves.
func Diff(routes, ops []string) (missing, stale []string) {
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			missing = append(missing, r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			stale = append(stale, o)
		}
	}
	return missing, stale
}

// Check loads and validates the description at path and says which of
// routes it lacks and which of its operations no route serves.
func Check(path string, routes []string) ([]string, error) {
	doc, err := Load(path)
	if err != nil {
		return nil, err
	}
	missing, stale := Diff(routes, Operations(doc))
	var out []string
	for _, r := range missing {
		out = append(out, fmt.Sprintf("%s lacks %s", path, r))
	}
	for _, o := range stale {
		out = append(out, fmt.Sprintf("%s describes %s, which no route serves", path, o))
	}
	return out, nil
}
