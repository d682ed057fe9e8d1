package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/freqcap/freqcap/shared/counting"
)

// FetchSchema reads what the counter at counterURL counts (GET /v1/schema),
// for DirectOptions.Schema; token is its bearer token, empty for none.
func FetchSchema(ctx context.Context, counterURL, token string) (counting.Schema, error) {
	var s counting.Schema
	u, err := url.Parse(counterURL)
	if err != nil || u.Host == "" {
		return s, fmt.Errorf("freqcap client: counter URL must be http(s)://host:port, got %q", counterURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.JoinPath("/v1/schema").String(), nil)
	if err != nil {
		return s, err
	}
	resp, err := withToken(nil, http.DefaultTransport, token).Do(req)
	if err != nil {
		return s, fmt.Errorf("freqcap client: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("freqcap client: GET /v1/schema answered %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("freqcap client: GET /v1/schema: %w", err)
	}
	return s, nil
}
