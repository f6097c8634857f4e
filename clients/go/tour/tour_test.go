package tour_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	ranking "ranking-service/clients/go"
	"ranking-service/clients/go/internal/testserver"
	"ranking-service/clients/go/rankingv1"
	"ranking-service/clients/go/tour"
)

func TestTourReadsWhatItRecorded(t *testing.T) {
	endpoint := testserver.Start(t)
	writer, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Token: testserver.WriteToken})
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	admin, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Token: testserver.AdminToken})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var printed strings.Builder
	seen, err := tour.Run(ctx, writer, admin, "go-tour", &printed)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + printed.String())
	if got, want := seen.Recorded.GetAccepted(), uint32(len(tour.Events("x", time.Now()))); got != want {
		t.Errorf("accepted %d events, want %d", got, want)
	}
	if got := seen.Recompute.GetProducts(); got != tour.Products {
		t.Errorf("recompute ranked %d products, want %d", got, tour.Products)
	}
	// Product 3's order puts it first; 12 and 11 have 11 counted views each (one of 12's
	// was retracted) and 12's like breaks the tie; the rest follow their views.
	want := [][]int64{{3, 12, 11, 10, 9}, {8, 7, 6, 5, 4}, {2, 1}}
	if !reflect.DeepEqual(seen.Pages, want) {
		t.Errorf("pages %v, want %v", seen.Pages, want)
	}
	rank := seen.Rank
	if rank.GetProduct().GetRank() != 3 || rank.GetTotal() != tour.Products ||
		len(rank.GetAbove()) != 1 || rank.GetAbove()[0].GetProductId() != 12 ||
		len(rank.GetBelow()) != 1 || rank.GetBelow()[0].GetProductId() != 10 {
		t.Errorf("rank of 11: %v", rank)
	}
	e := seen.Explain
	if e.GetViews() != 11 || e.GetRetractedViews() != 1 || e.GetLikes() != 1 ||
		e.GetProduct().GetBreakdown().GetMainFloor() != 1 || e.GetProduct().GetRank() != 2 {
		t.Errorf("explanation of 12: %v", e)
	}

	// The same batch again is taken once: every event a duplicate.
	batch := tour.Events("go-tour", time.Now())
	again, err := writer.RecordEvents(ctx, &rankingv1.RecordEventsRequest{Events: batch})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetAccepted() != 0 || again.GetDuplicates() != uint32(len(batch)) {
		t.Errorf("the batch again: %v", again)
	}
}
