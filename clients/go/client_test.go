package ranking_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	ranking "ranking-service/clients/go"
	"ranking-service/clients/go/internal/testserver"
	"ranking-service/clients/go/rankingv1"
)

// A server that takes one call at a time sheds the rest with RetryInfo; the client waits
// as asked and repeats them, so every call of a crowd succeeds, and it says so via OnRetry.
func TestShedCallsAreRetriedUntilTaken(t *testing.T) {
	endpoint := testserver.Start(t, "RANKING_MAX_CONCURRENT_CALLS=1")
	var retries, shed atomic.Int64
	client, err := ranking.Dial(ranking.Options{
		Endpoint: endpoint,
		Token:    testserver.WriteToken,
		Deadline: 60 * time.Second,
		Retry:    ranking.Retry{MaxAttempts: 50, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond},
		OnRetry: func(_ string, _ int, err error, _ time.Duration) {
			retries.Add(1)
			if _, asked := ranking.RetryAfter(err); asked && status.Code(err) == codes.ResourceExhausted {
				shed.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	// Crowds of 32 concurrent batches until one was shed (the first crowd, in practice).
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; shed.Load() == 0; round++ {
		if time.Now().After(deadline) {
			t.Fatal("no call was shed in 60 s of crowds against a limit of one call")
		}
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for c := 0; c < 32; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				events := make([]*rankingv1.Event, 200)
				for i := range events {
					events[i] = &rankingv1.Event{
						EventId: fmt.Sprintf("shed-%d-%d-%d", round, c, i), ProductId: int64(1 + i),
						Type: rankingv1.EventType_EVENT_TYPE_VIEW, OccurredAt: timestamppb.Now(),
					}
				}
				r, err := client.RecordEvents(context.Background(), &rankingv1.RecordEventsRequest{Events: events})
				if err == nil && r.GetAccepted() != 200 {
					err = fmt.Errorf("accepted %d of 200", r.GetAccepted())
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a call of the crowd failed: %v", err)
			}
		}
	}
	if retries.Load() < shed.Load() {
		t.Fatalf("retries %d < shed %d", retries.Load(), shed.Load())
	}
}

// A wrong token is refused at once (UNAUTHENTICATED), and not retried.
func TestAWrongTokenIsRefused(t *testing.T) {
	endpoint := testserver.Start(t)
	var retries atomic.Int64
	client, err := ranking.Dial(ranking.Options{
		Endpoint: endpoint, Token: "not-a-token",
		OnRetry: func(string, int, error, time.Duration) { retries.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_, err = client.GetTopN(context.Background(), &rankingv1.GetTopNRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetTopN with a wrong token: %v", err)
	}
	if retries.Load() != 0 {
		t.Fatalf("a refusal was retried %d times", retries.Load())
	}
}

// Over TLS, trusting the service's certificate by a PEM file: the token travels and opens
// the calls it names.
func TestTLS(t *testing.T) {
	endpoint, ca := testserver.StartTLS(t)
	config, err := ranking.TLSFromCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Token: testserver.AdminToken, TLS: config})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	access, err := client.GetAccess(context.Background(), &rankingv1.GetAccessRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !access.GetAdmin() || !access.GetRead() || access.GetWrite() {
		t.Fatalf("the admin token over TLS opens %v", access)
	}
	// Plaintext against a TLS port fails; it is not taken for a shed call.
	plain, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Retry: ranking.Retry{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.GetAccess(context.Background(), &rankingv1.GetAccessRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext against TLS: %v", err)
	}
}
