// Package ranking is the Go client of the ranking service: the generated stubs of
// ranking.v1 (package rankingv1) behind a connection that sets what a caller needs in
// production on every call: the bearer token, a default deadline, TLS, and the retry of a
// call the service shed (RESOURCE_EXHAUSTED with a google.rpc.RetryInfo detail) or could not
// take (UNAVAILABLE), bounded in attempts and by the call's deadline.
//
//	client, err := ranking.Dial(ranking.Options{Endpoint: "127.0.0.1:50051", Token: token})
//	if err != nil { ... }
//	defer client.Close()
//	top, err := client.GetTopN(ctx, &rankingv1.GetTopNRequest{Limit: 10})
//
// Every RPC of the service is a method of Client (it embeds the generated
// RankingServiceClient), so a new RPC needs no change here.
package ranking

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"ranking-service/clients/go/rankingv1"
)

// Options say where the service is and how to call it. Only Endpoint is required.
type Options struct {
	// Endpoint is host:port (or any gRPC target, e.g. dns:///ranking:50051).
	Endpoint string
	// Token is the bearer token sent on every call (empty: none). The service has a token
	// per class of calls: write (RecordEvent(s)), read, and admin (Recompute, controls,
	// which also opens the reads).
	Token string
	// Deadline is given to every unary call whose context has none (0: 10 s); a retried
	// call keeps its first attempt's deadline. Streams (WatchTopN) get none.
	Deadline time.Duration
	// TLS, when set, makes the connection TLS with this configuration; nil is plaintext.
	// TLSFromCA builds one trusting a PEM file's authorities.
	TLS *tls.Config
	// Retry bounds the repeats of a shed or unavailable call (zero value: DefaultRetry).
	Retry Retry
	// OnRetry, when set, is told of every repeat before its wait: the method, the attempt
	// about to be made (2 for the first retry), the error that caused it and the wait.
	// Meant for logs and metrics.
	OnRetry func(method string, attempt int, err error, wait time.Duration)
	// DialOptions are added after the client's own (interceptors, stats handlers, ...).
	DialOptions []grpc.DialOption
}

// DefaultDeadline is the deadline of a unary call whose context has none.
const DefaultDeadline = 10 * time.Second

// Client is a connection to the ranking service; every RPC of ranking.v1 is a method of
// it. It is safe for concurrent use; make one per process and Close it at the end.
type Client struct {
	rankingv1.RankingServiceClient
	conn *grpc.ClientConn
}

// Dial makes a client of the service at o.Endpoint. It does not wait for the connection:
// the first call connects (and is retried while the service is unavailable).
func Dial(o Options) (*Client, error) {
	if o.Endpoint == "" {
		return nil, errors.New("ranking: Options.Endpoint is empty")
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	retry := o.Retry.orDefault()
	transport := insecure.NewCredentials()
	if o.TLS != nil {
		transport = credentials.NewTLS(o.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithChainUnaryInterceptor(
			bearer(o.Token),
			deadline(o.Deadline),
			retrying(retry, o.OnRetry),
		),
		grpc.WithChainStreamInterceptor(bearerStream(o.Token)),
	}
	conn, err := grpc.NewClient(o.Endpoint, append(opts, o.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("ranking: %w", err)
	}
	return &Client{RankingServiceClient: rankingv1.NewRankingServiceClient(conn), conn: conn}, nil
}

// Close closes the connection; calls in progress fail.
func (c *Client) Close() error { return c.conn.Close() }

// TLSFromCA is a TLS configuration that trusts the authorities of a PEM file (a private CA,
// or the service's self-signed certificate), for Options.TLS.
func TLSFromCA(pemPath string) (*tls.Config, error) {
	pem, err := os.ReadFile(pemPath)
	if err != nil {
		return nil, fmt.Errorf("ranking: reading the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ranking: %s holds no PEM certificate", pemPath)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// bearer adds the token to every unary call. It is metadata set by an interceptor rather
// than per-RPC credentials, which grpc-go refuses to send over plaintext: inside a cluster
// the service is often reached without TLS.
func bearer(token string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(withToken(ctx, token), method, req, reply, cc, opts...)
	}
}

func bearerStream(token string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withToken(ctx, token), desc, cc, method, opts...)
	}
}

// deadline gives a unary call without one the client's default.
func deadline(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
