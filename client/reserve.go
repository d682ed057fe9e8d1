package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/freqcap/freqcap/campaign"
	"github.com/freqcap/freqcap/shared/counting"
)

// Reserve holds the bid bidID (its notices' eid: with NoticeSigner, the
// bid request id and imp id joined by ':') on every counter the
// candidates' declared caps read for ids, in one round trip, for the
// counter's COUNTER_RESERVE_TTL (ttl when positive). A decide with
// Options.CountReserved counts it meanwhile; the bid's win notice turns it
// into the count (exactly once, in the same write), its loss notice or
// the TTL releases it. Reserve the candidates the bid response carries,
// right after deciding: concurrent auctions of one device then see each
// other's bids. It answers per candidate how many counters hold the bid;
// the error says why none do.
func (c *Client) Reserve(ctx context.Context, ids Identities, cands []Creative, bidID string, ttl time.Duration) ([]counting.ReserveAnswer, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return splitCall(cands, c.maxBatch, func(part []Creative) ([]counting.ReserveAnswer, error) {
		return c.reserve(ctx, &counting.ReserveRequest{Identities: ids, Candidates: part, Bid: bidID, TTLMs: ttl.Milliseconds()})
	})
}

// reserveBid asks POST /v1/reserve.
func (h *httpReader) reserveBid(ctx context.Context, req *counting.ReserveRequest) ([]counting.ReserveAnswer, error) {
	return results[counting.ReserveAnswer](ctx, h, h.reserveURL, req)
}

// directReserve reserves in this process as the counter's /v1/reserve does.
func directReserve(counters campaign.Counters, parser *campaign.Parser, most int, ttl time.Duration) func(context.Context, *counting.ReserveRequest) ([]counting.ReserveAnswer, error) {
	if ttl <= 0 {
		ttl = 3 * time.Second
	}
	return func(ctx context.Context, req *counting.ReserveRequest) ([]counting.ReserveAnswer, error) {
		if err := parser.CheckReserve(req, most); err != nil {
			return nil, fmt.Errorf("freqcap client: %w", err)
		}
		deadline, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("freqcap client: reserve without a deadline")
		}
		return counters.Reserve(ctx, req, ttl, time.Until(deadline)), nil
	}
}
