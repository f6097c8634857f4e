package ranking

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Retry bounds how a call the service shed or could not take is repeated. Every call of the
// service may be repeated: writes carry idempotent event ids, reads and recomputes change
// nothing a repeat could double.
type Retry struct {
	// MaxAttempts counts attempts in all, the first included (1: no retry).
	MaxAttempts int
	// BaseDelay is the wait before the first retry, doubled each time up to MaxDelay; each
	// wait is stretched at random by up to its own length, so callers refused together do
	// not come back together. A shed call waits at least what its RetryInfo asks.
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// DefaultRetry is the policy of a client whose Options.Retry is the zero value.
var DefaultRetry = Retry{MaxAttempts: 6, BaseDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second}

func (r Retry) orDefault() Retry {
	if r == (Retry{}) {
		return DefaultRetry
	}
	if r.MaxAttempts < 1 {
		r.MaxAttempts = 1
	}
	if r.MaxDelay < r.BaseDelay {
		r.MaxDelay = r.BaseDelay
	}
	return r
}

// RetryAfter is what the service asked a shed call to wait (its google.rpc.RetryInfo), and
// whether it asked at all.
func RetryAfter(err error) (time.Duration, bool) {
	s, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok && info.GetRetryDelay() != nil {
			return info.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// Retryable says whether a failed call is worth repeating: the service could not be
// reached (UNAVAILABLE), or it shed the call and said when to retry (RESOURCE_EXHAUSTED
// with RetryInfo; one without refuses the request itself, e.g. a message over the size
// limit, and is final).
func Retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		_, ok := RetryAfter(err)
		return ok
	default:
		return false
	}
}

// retrying repeats a retryable unary call within the call's deadline: no wait starts that
// would end past it.
func retrying(r Retry, onRetry func(string, int, error, time.Duration)) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		delay := r.BaseDelay
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt >= r.MaxAttempts || !Retryable(err) {
				return err
			}
			wait := delay + time.Duration(rand.Int64N(int64(delay)+1))
			if asked, ok := RetryAfter(err); ok && asked > wait {
				wait = asked
			}
			if end, ok := ctx.Deadline(); ok && time.Until(end) < wait {
				return err
			}
			if onRetry != nil {
				onRetry(method, attempt+1, err, wait)
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return err
			case <-timer.C:
			}
			delay = min(2*delay, r.MaxDelay)
		}
	}
}

// withToken adds `authorization: Bearer <token>` to the call's outgoing metadata.
func withToken(ctx context.Context, token string) context.Context {
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}
