package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/freqcap/freqcap/shared/apierr"
	"github.com/freqcap/freqcap/shared/auth"
	"github.com/freqcap/freqcap/shared/counting"
	"github.com/freqcap/freqcap/shared/ids"
)

// Schema is what the counter counts (its GET /v1/schema): callback keeps
// no copy of the counter's dimensions or limits in its own settings.
type Schema struct {
	url    string
	client *http.Client
	log    *slog.Logger
	cur    atomic.Pointer[counting.Schema]
	// fresh serializes Fresh; fetched is when it last asked.
	fresh   sync.Mutex
	fetched time.Time
}

func newSchema(counter *url.URL, token string, log *slog.Logger) *Schema {
	return &Schema{url: counter.JoinPath("/v1/schema").String(), client: &http.Client{Timeout: 2 * time.Second, Transport: auth.Transport(token, nil)}, log: log}
}

// Get is the latest schema, nil until the counter has answered once.
func (s *Schema) Get() *counting.Schema { return s.cur.Load() }

// Fetch asks the counter for its schema.
func (s *Schema) Fetch(ctx context.Context) (*counting.Schema, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", s.url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var sch counting.Schema
	if err := json.Unmarshal(b, &sch); err != nil || len(sch.Dimensions) == 0 {
		return nil, fmt.Errorf("GET %s: not a schema (%v): %.200s", s.url, err, b)
	}
	if old := s.cur.Swap(&sch); old == nil {
		s.log.Info("counter schema", "dimensions", sch.Dimensions, "events", sch.Events, "maxWindowHours", sch.MaxWindowHours)
	} else if !slices.Equal(old.Dimensions, sch.Dimensions) || !slices.Equal(old.Events, sch.Events) ||
		old.MaxWindowHours != sch.MaxWindowHours || old.MaxPaceWindowSec != sch.MaxPaceWindowSec {
		s.log.Info("counter schema changed", "dimensions", sch.Dimensions, "events", sch.Events, "maxWindowHours", sch.MaxWindowHours)
	}
	return &sch, nil
}

// Need is the schema, fetched now when none is known yet.
func (s *Schema) Need(ctx context.Context) (*counting.Schema, error) {
	if sch := s.Get(); sch != nil {
		return sch, nil
	}
	return s.Fetch(ctx)
}

// freshEvery bounds how often Fresh asks the counter.
const freshEvery = time.Second

// Fresh is the newest schema once the counter has refused something
// built from used: fetched now unless another delivery already did (or
// did within freshEvery). A counter restarted with other dimensions or
// limits refuses what the old schema let through until callback knows.
func (s *Schema) Fresh(ctx context.Context, used *counting.Schema) *counting.Schema {
	s.fresh.Lock()
	defer s.fresh.Unlock()
	if cur := s.Get(); cur != used && cur != nil {
		return cur
	}
	if time.Since(s.fetched) < freshEvery {
		return used
	}
	s.fetched = time.Now()
	sch, err := s.Fetch(ctx)
	if err != nil {
		return used
	}
	return sch
}

// sameSchema reports whether a and b check writes alike.
func sameSchema(a, b *counting.Schema) bool {
	return slices.Equal(a.Dimensions, b.Dimensions) && slices.Equal(a.Events, b.Events) &&
		a.MaxWindowHours == b.MaxWindowHours && a.MaxPaceWindowSec == b.MaxPaceWindowSec && a.MaxBatch == b.MaxBatch
}

// Keep refreshes the schema every `every` (every second until the first
// answer) until ctx ends; the first fetch is the caller's.
func (s *Schema) Keep(ctx context.Context, every time.Duration) {
	for {
		wait := every
		if s.Get() == nil {
			wait = time.Second
		}
		if !sleep(ctx, wait) {
			return
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = s.Fetch(fctx)
		cancel()
	}
}

// dimensionName is what a dimension's name may look like (the counter's
// rule); only such parameters are kept while the schema is unknown.
var dimensionName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// maxCandidates bounds the parameters kept for a notice taken before the
// counter's schema is known.
const maxCandidates = 16

// candidates are a notice's parameters that may be dimensions: the schema's
// dimensions when it is known, else every parameter named like one (the
// forwarder keeps the dimensions among them once the counter answers).
func candidates(sch *counting.Schema, form url.Values) map[string]string {
	out := map[string]string{}
	if sch != nil {
		for _, d := range sch.Dimensions {
			if v := form.Get(d); v != "" {
				out[d] = v
			}
		}
		return out
	}
	for name, vs := range form {
		if name == "cid" || name == "eid" || name == reservedParam || len(vs) == 0 || vs[0] == "" || !dimensionName.MatchString(name) {
			continue
		}
		if len(out) == maxCandidates {
			break
		}
		out[name] = vs[0]
	}
	return out
}

// pickDimensions checks a notice's dimensions against the schema: those
// the counter counts, each a valid id that is not an unsubstituted macro
// or a test render, at least one. dims itself is answered when it holds
// only those (as candidates makes them once the schema is known): a
// notice's dimensions are not copied.
func pickDimensions(sch *counting.Schema, dims map[string]string) (map[string]string, *rejection) {
	kept := 0
	for _, d := range sch.Dimensions {
		v, ok := dims[d]
		if !ok || v == "" {
			continue
		}
		if rej := checkValue(d, v); rej != nil {
			return nil, rej
		}
		if !ids.ValidID(v) {
			return nil, &rejection{"invalid", apierr.Invalid("%s must be %s", d, ids.IDRule)}
		}
		kept++
	}
	switch {
	case kept == 0:
		return nil, &rejection{"invalid", apierr.Invalid("at least one dimension is required (%s)", strings.Join(sch.Dimensions, ", "))}
	case kept == len(dims):
		return dims, nil
	}
	out := make(map[string]string, kept)
	for _, d := range sch.Dimensions {
		if v := dims[d]; v != "" {
			out[d] = v
		}
	}
	return out, nil
}
