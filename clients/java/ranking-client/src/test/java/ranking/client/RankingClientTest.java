package ranking.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import ranking.client.example.Tour;
import ranking.v1.Ranking.Event;
import ranking.v1.Ranking.EventType;
import ranking.v1.Ranking.GetTopNRequest;
import ranking.v1.Ranking.RecordEventsRequest;
import ranking.v1.Ranking.RecordEventsResponse;

/** The client against a real server: the tour's answers, a shed call retried, a wrong token refused. */
class RankingClientTest {
    @Test
    void theTourReadsWhatItRecorded() throws Exception {
        try (TestServer server = TestServer.start(Map.of());
                RankingClient writer = RankingClient.builder(server.endpoint).token(TestServer.WRITE_TOKEN).build();
                RankingClient admin = RankingClient.builder(server.endpoint).token(TestServer.ADMIN_TOKEN).build()) {
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            Tour.Seen seen = Tour.run(writer, admin, "java-tour", new PrintStream(printed, true));
            System.out.print(printed);
            List<Event> batch = Tour.events("java-tour");
            assertEquals(batch.size(), seen.recorded().getAccepted());
            assertEquals(Tour.PRODUCTS, seen.recompute().getProducts());
            // Product 3's order puts it first; 12 and 11 have 11 counted views each (one of 12's
            // was retracted) and 12's like breaks the tie; the rest follow their views.
            assertEquals(List.of(List.of(3L, 12L, 11L, 10L, 9L), List.of(8L, 7L, 6L, 5L, 4L), List.of(2L, 1L)), seen.pages());
            assertEquals(3, seen.rank().getProduct().getRank());
            assertEquals(12, seen.rank().getAbove(0).getProductId());
            assertEquals(10, seen.rank().getBelow(0).getProductId());
            assertEquals(List.of(11L, 1L, 1L, 2L, 1L), List.of(seen.explain().getViews(), seen.explain().getRetractedViews(),
                    seen.explain().getLikes(), seen.explain().getProduct().getRank(),
                    seen.explain().getProduct().getBreakdown().getMainFloor()));
            // The same batch again is taken once: every event a duplicate.
            RecordEventsResponse again = writer.recordEvents(RecordEventsRequest.newBuilder().addAllEvents(batch).build());
            assertEquals(List.of(0, batch.size()), List.of(again.getAccepted(), again.getDuplicates()));
        }
    }

    @Test
    void shedCallsAreRetriedUntilTaken() throws Exception {
        AtomicInteger shed = new AtomicInteger();
        try (TestServer server = TestServer.start(Map.of("RANKING_MAX_CONCURRENT_CALLS", "1"));
                RankingClient client = RankingClient.builder(server.endpoint)
                        .token(TestServer.WRITE_TOKEN)
                        .deadline(Duration.ofSeconds(60))
                        .retry(new RankingClient.RetryPolicy(50, Duration.ofMillis(10), Duration.ofMillis(200)))
                        .onRetry((method, attempt, cause, wait) -> {
                            if (cause.getStatus().getCode() == Status.Code.RESOURCE_EXHAUSTED
                                    && RankingClient.retryAfter(cause).isPresent()) {
                                shed.incrementAndGet();
                            }
                        })
                        .build()) {
            ExecutorService pool = Executors.newFixedThreadPool(32);
            try {
                // Crowds of 32 concurrent batches until one was shed (the first crowd, in practice).
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                for (int round = 0; shed.get() == 0; round++) {
                    assertTrue(System.nanoTime() < deadline, "no call was shed in 60 s of crowds against a limit of one call");
                    List<Future<RecordEventsResponse>> crowd = new ArrayList<>();
                    for (int c = 0; c < 32; c++) {
                        RecordEventsRequest.Builder batch = RecordEventsRequest.newBuilder();
                        for (int i = 0; i < 200; i++) {
                            batch.addEvents(Event.newBuilder()
                                    .setEventId("shed-" + round + "-" + c + "-" + i)
                                    .setProductId(1 + i)
                                    .setType(EventType.EVENT_TYPE_VIEW)
                                    .setOccurredAt(Tour.events("now").get(0).getOccurredAt()));
                        }
                        RecordEventsRequest request = batch.build();
                        crowd.add(pool.submit(() -> client.recordEvents(request)));
                    }
                    for (Future<RecordEventsResponse> answer : crowd) {
                        assertEquals(200, answer.get().getAccepted());
                    }
                }
            } finally {
                pool.shutdownNow();
            }
        }
    }

    @Test
    void aWrongTokenIsRefusedAndNotRetried() throws Exception {
        AtomicInteger retries = new AtomicInteger();
        try (TestServer server = TestServer.start(Map.of());
                RankingClient client = RankingClient.builder(server.endpoint)
                        .token("not-a-token")
                        .onRetry((method, attempt, cause, wait) -> retries.incrementAndGet())
                        .build()) {
            StatusRuntimeException refused =
                    assertThrows(StatusRuntimeException.class, () -> client.getTopN(GetTopNRequest.getDefaultInstance()));
            assertEquals(Status.Code.UNAUTHENTICATED, refused.getStatus().getCode());
            assertEquals(0, retries.get());
        }
    }

    @Test
    void tlsTrustingTheServicesCertificate() throws Exception {
        try (TestServer server = TestServer.startTls();
                RankingClient client = RankingClient.builder(server.endpoint)
                        .token(TestServer.ADMIN_TOKEN)
                        .trustCertificates(server.certificate)
                        .build();
                RankingClient plain = RankingClient.builder(server.endpoint)
                        .retry(new RankingClient.RetryPolicy(1, Duration.ZERO, Duration.ZERO))
                        .build()) {
            var access = client.getAccess(ranking.v1.Ranking.GetAccessRequest.getDefaultInstance());
            assertEquals(List.of(true, true, false), List.of(access.getAdmin(), access.getRead(), access.getWrite()));
            // Plaintext against the TLS port fails (grpc-java says INTERNAL: the peer's bytes are
            // not HTTP/2), and is not taken for a shed call.
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
                    () -> plain.getAccess(ranking.v1.Ranking.GetAccessRequest.getDefaultInstance()));
            assertTrue(refused.getStatus().getCode() != Status.Code.RESOURCE_EXHAUSTED, refused.toString());
        }
    }
}
