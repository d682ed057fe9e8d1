// Package httpjson writes JSON answers and turns errors into them: the one
// place where an error becomes an HTTP status and a {"code","msg"} body.
package httpjson

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/freqcap/freqcap/shared/apierr"
)

// Write sends v as JSON with the given status.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":10005,"msg":"internal error"}`)
	}
	WriteRaw(w, status, b)
}

// WriteRaw sends an already encoded JSON body with the given status.
func WriteRaw(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = contentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

var contentType = []string{"application/json"}

// Body is the JSON shape of every error answer.
type Body struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
}

// Error answers err: an *apierr.Error with its own code and message, anything
// else as 500 whose details go to the log and never to the caller.
func Error(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *apierr.Error
	if !errors.As(err, &e) {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		Write(w, http.StatusInternalServerError, Body{Code: apierr.Internal, Msg: "internal error"})
		return
	}
	status := StatusOf(e.Code)
	if status >= 500 {
		log.WarnContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "code", e.Code, "err", err)
	}
	Write(w, status, Body{Code: e.Code, Msg: e.Msg})
}

// StatusOf maps an application code to its HTTP status.
func StatusOf(code int) int {
	switch code {
	case apierr.OK:
		return http.StatusOK
	case apierr.InvalidArgument:
		return http.StatusBadRequest
	case apierr.KeyNotFound:
		return http.StatusNotFound
	case apierr.Timeout, apierr.Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// NotFound answers requests for routes that do not exist.
func NotFound(w http.ResponseWriter, r *http.Request) {
	Write(w, http.StatusNotFound, Body{Code: apierr.KeyNotFound, Msg: "no such route: " + r.Method + " " + r.URL.Path})
}

// MethodNotAllowed answers a known route asked with the wrong method.
func MethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	Write(w, http.StatusMethodNotAllowed, Body{Code: apierr.InvalidArgument, Msg: "method " + r.Method + " not allowed on " + r.URL.Path})
}

// Query parses the request's query strictly: a pair that does not decode
// (a bad %-escape, a ';' separator) is an error naming it, where
// r.URL.Query() would drop it silently (an eid dropped makes a retry count
// twice).
func Query(r *http.Request) (url.Values, error) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err == nil {
		return vals, nil
	}
	for pair := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if _, perr := url.ParseQuery(pair); perr != nil {
			return nil, apierr.Invalid("malformed query parameter %q: %s", pair, strings.TrimPrefix(perr.Error(), "invalid "))
		}
	}
	return nil, apierr.Invalid("malformed query: %s", err)
}

// EachParam calls fn with each parameter of a raw query string in order,
// unescaped as url.ParseQuery unescapes them, without building url.Values:
// the hot read's parsing allocates nothing for a plain query. A malformed
// query is the error Query gives; an error of fn ends the walk and is
// returned.
func EachParam(raw string, fn func(name, value string) error) error {
	for rest := raw; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		if !plain(pair) {
			var err1, err2 error
			name, err1 = url.QueryUnescape(name)
			value, err2 = url.QueryUnescape(value)
			if err1 != nil || err2 != nil || strings.Contains(pair, ";") {
				if _, err := Query(&http.Request{URL: &url.URL{RawQuery: raw}}); err != nil {
					return err
				}
				return apierr.Invalid("malformed query parameter %q", pair)
			}
		}
		if err := fn(name, value); err != nil {
			return err
		}
	}
	return nil
}

// plain reports whether a pair needs no unescaping and is no error: no
// '%', '+' or ';'.
func plain(pair string) bool {
	for i := 0; i < len(pair); i++ {
		if c := pair[i]; c == '%' || c == '+' || c == ';' {
			return false
		}
	}
	return true
}

// Params is Query for an endpoint that takes only the parameters named in
// allowed (true: may be given more than once): an unknown or repeated
// parameter is an error naming it and the ones the endpoint takes, so a
// typo is never ignored.
func Params(r *http.Request, allowed map[string]bool) (url.Values, error) {
	vals, err := Query(r)
	if err != nil {
		return nil, err
	}
	for name, vs := range vals {
		many, ok := allowed[name]
		switch {
		case !ok:
			return nil, apierr.Invalid("unknown parameter %q: this endpoint takes %s", name, strings.Join(slices.Sorted(maps.Keys(allowed)), ", "))
		case len(vs) > 1 && !many:
			return nil, apierr.Invalid("%s must be given once", name)
		}
	}
	return vals, nil
}

// RequireJSON refuses a request body that is not declared JSON: a form or
// text/plain body is a mistake, not a request.
func RequireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" { // as clients send it: nothing to parse
		return nil
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return apierr.Invalid("Content-Type must be application/json, got %q", ct)
	}
	return nil
}

// Unmarshal decodes body, one JSON value with nothing after it, into v
// strictly: member names exactly as the fields spell them (no other case),
// each once, none unknown. A field an exact name would miss, or a name
// given twice (where the last would win unseen), is an error naming its
// place (a JSON pointer such as /items/3/eid).
func Unmarshal(body []byte, v any, shape string) error {
	if err := jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)); err != nil {
		return apierr.Invalid("body must be JSON %s: %s", shape, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "jsontext: "))
	}
	return nil
}
