// Command ranking-example runs the client's tour against a running service:
//
//	RANKING_ENDPOINT=127.0.0.1:50051 RANKING_WRITE_TOKEN=… RANKING_ADMIN_TOKEN=… go run ./cmd/ranking-example
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	ranking "ranking-service/clients/go"
	"ranking-service/clients/go/tour"
)

func main() {
	endpoint := os.Getenv("RANKING_ENDPOINT")
	if endpoint == "" {
		endpoint = "127.0.0.1:50051"
	}
	writer, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Token: os.Getenv("RANKING_WRITE_TOKEN")})
	if err != nil {
		fail(err)
	}
	defer writer.Close()
	admin, err := ranking.Dial(ranking.Options{Endpoint: endpoint, Token: os.Getenv("RANKING_ADMIN_TOKEN")})
	if err != nil {
		fail(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := tour.Run(ctx, writer, admin, fmt.Sprintf("example-%d", time.Now().UnixNano()), os.Stdout); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ranking-example:", err)
	os.Exit(1)
}
