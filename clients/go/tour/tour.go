// Package tour is the client's example, shared by cmd/ranking-example and the tests: record a
// batch of events (one of them a retraction), recompute today, walk the top with page
// tokens, read a rank with its neighbours and an explanation, printing each.
package tour

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	ranking "ranking-service/clients/go"
	"ranking-service/clients/go/rankingv1"
)

// Products is how many products the tour's events touch: product p gets p views, product 3
// an order, product 12 a like, and one of product 12's views is retracted.
const Products = 12

// Seen is what the tour read, for its callers to check.
type Seen struct {
	Recorded  *rankingv1.RecordEventsResponse
	Recompute *rankingv1.RecomputeResponse
	// Pages are the product ids of each page of the top, in order.
	Pages   [][]int64
	Rank    *rankingv1.GetRankResponse
	Explain *rankingv1.ExplainRankResponse
}

// Events is the tour's batch; prefix keeps its event ids apart from another run's.
func Events(prefix string, at time.Time) []*rankingv1.Event {
	ts := timestamppb.New(at)
	var events []*rankingv1.Event
	for p := int64(1); p <= Products; p++ {
		for i := int64(0); i < p; i++ {
			events = append(events, &rankingv1.Event{
				EventId: fmt.Sprintf("%s-view-%d-%d", prefix, p, i), ProductId: p,
				Type: rankingv1.EventType_EVENT_TYPE_VIEW, OccurredAt: ts,
			})
		}
	}
	return append(events,
		&rankingv1.Event{EventId: prefix + "-order-3", ProductId: 3, Type: rankingv1.EventType_EVENT_TYPE_ORDER, Amount: 10_000, OccurredAt: ts},
		&rankingv1.Event{EventId: prefix + "-like-12", ProductId: 12, Type: rankingv1.EventType_EVENT_TYPE_LIKE, OccurredAt: ts},
		// A refund or fraud check takes a view back: it leaves the day's counts once.
		&rankingv1.Event{EventId: prefix + "-retract-12", ProductId: 12, Type: rankingv1.EventType_EVENT_TYPE_RETRACT, Retracts: prefix + "-view-12-0", OccurredAt: ts},
	)
}

// Run records the tour's events with writer, then reads with admin (whose token opens the
// reads and Recompute), printing what it reads to out.
func Run(ctx context.Context, writer, admin *ranking.Client, prefix string, out io.Writer) (*Seen, error) {
	seen := &Seen{}
	var err error
	seen.Recorded, err = writer.RecordEvents(ctx, &rankingv1.RecordEventsRequest{Events: Events(prefix, time.Now())})
	if err != nil {
		return nil, fmt.Errorf("RecordEvents: %w", err)
	}
	fmt.Fprintf(out, "recorded: %d accepted, %d duplicates\n", seen.Recorded.GetAccepted(), seen.Recorded.GetDuplicates())

	seen.Recompute, err = admin.Recompute(ctx, &rankingv1.RecomputeRequest{})
	if err != nil {
		return nil, fmt.Errorf("Recompute: %w", err)
	}
	fmt.Fprintf(out, "recomputed %s: %d products, version %d\n", seen.Recompute.GetDate(), seen.Recompute.GetProducts(), seen.Recompute.GetVersion())

	// A walk by page token reads one version of the ranking however often it is republished.
	request := &rankingv1.GetTopNRequest{Window: rankingv1.Window_WINDOW_DAILY, Limit: 5}
	for {
		page, err := admin.GetTopN(ctx, request)
		if err != nil {
			return nil, fmt.Errorf("GetTopN: %w", err)
		}
		var ids []int64
		for _, p := range page.GetProducts() {
			ids = append(ids, p.GetProductId())
			fmt.Fprintf(out, "#%d product %d score %.9f\n", p.GetRank(), p.GetProductId(), p.GetScore())
		}
		seen.Pages = append(seen.Pages, ids)
		if page.GetNextPageToken() == "" {
			break
		}
		request = &rankingv1.GetTopNRequest{PageToken: page.GetNextPageToken()}
	}

	seen.Rank, err = admin.GetRank(ctx, &rankingv1.GetRankRequest{ProductId: 11, Neighbors: 1})
	if err != nil {
		return nil, fmt.Errorf("GetRank: %w", err)
	}
	fmt.Fprintf(out, "product 11 is #%d of %d (above: %v, below: %v)\n", seen.Rank.GetProduct().GetRank(),
		seen.Rank.GetTotal(), ids(seen.Rank.GetAbove()), ids(seen.Rank.GetBelow()))

	seen.Explain, err = admin.ExplainRank(ctx, &rankingv1.ExplainRankRequest{ProductId: 12})
	if err != nil {
		return nil, fmt.Errorf("ExplainRank: %w", err)
	}
	e := seen.Explain
	fmt.Fprintf(out, "product 12: %d views (%d retracted), %d likes: %.1f + %.1f = %.3f\n",
		e.GetViews(), e.GetRetractedViews(), e.GetLikes(), e.GetViewPoints(), e.GetLikePoints(), e.GetMainScore())
	return seen, nil
}

func ids(products []*rankingv1.RankedProduct) []int64 {
	out := make([]int64, 0, len(products))
	for _, p := range products {
		out = append(out, p.GetProductId())
	}
	return out
}
