package ranking.client.example;

import com.google.protobuf.Timestamp;
import java.io.PrintStream;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import ranking.client.RankingClient;
import ranking.v1.Ranking.Event;
import ranking.v1.Ranking.EventType;
import ranking.v1.Ranking.ExplainRankRequest;
import ranking.v1.Ranking.ExplainRankResponse;
import ranking.v1.Ranking.GetRankRequest;
import ranking.v1.Ranking.GetRankResponse;
import ranking.v1.Ranking.GetTopNRequest;
import ranking.v1.Ranking.GetTopNResponse;
import ranking.v1.Ranking.RankedProduct;
import ranking.v1.Ranking.RecomputeRequest;
import ranking.v1.Ranking.RecomputeResponse;
import ranking.v1.Ranking.RecordEventsRequest;
import ranking.v1.Ranking.RecordEventsResponse;
import ranking.v1.Ranking.Window;

/**
 * The client's example: record a batch of events (one of them a retraction), recompute today,
 * walk the top with page tokens, read a rank with its neighbours and an explanation.
 *
 * <pre>
 * RANKING_ENDPOINT=127.0.0.1:50051 RANKING_WRITE_TOKEN=… RANKING_ADMIN_TOKEN=… \
 *   java -cp … ranking.client.example.Tour
 * </pre>
 */
public final class Tour {
    /** Product p gets p views, product 3 an order, product 12 a like, and one of 12's views is retracted. */
    public static final int PRODUCTS = 12;

    /** What the tour read, for its callers to check. */
    public record Seen(
            RecordEventsResponse recorded,
            RecomputeResponse recompute,
            List<List<Long>> pages,
            GetRankResponse rank,
            ExplainRankResponse explain) {}

    private Tour() {}

    /** The tour's batch; {@code prefix} keeps its event ids apart from another run's. */
    public static List<Event> events(String prefix) {
        Instant now = Instant.now();
        Timestamp at = Timestamp.newBuilder().setSeconds(now.getEpochSecond()).setNanos(now.getNano()).build();
        List<Event> events = new ArrayList<>();
        for (long p = 1; p <= PRODUCTS; p++) {
            for (int i = 0; i < p; i++) {
                events.add(event(prefix + "-view-" + p + "-" + i, p, EventType.EVENT_TYPE_VIEW, at).build());
            }
        }
        events.add(event(prefix + "-order-3", 3, EventType.EVENT_TYPE_ORDER, at).setAmount(10_000).build());
        events.add(event(prefix + "-like-12", 12, EventType.EVENT_TYPE_LIKE, at).build());
        // A refund or fraud check takes a view back: it leaves the day's counts once.
        events.add(event(prefix + "-retract-12", 12, EventType.EVENT_TYPE_RETRACT, at)
                .setRetracts(prefix + "-view-12-0")
                .build());
        return events;
    }

    private static Event.Builder event(String id, long product, EventType type, Timestamp at) {
        return Event.newBuilder().setEventId(id).setProductId(product).setType(type).setOccurredAt(at);
    }

    /** Records with {@code writer}, reads with {@code admin} (its token opens the reads and Recompute). */
    public static Seen run(RankingClient writer, RankingClient admin, String prefix, PrintStream out) {
        RecordEventsResponse recorded = writer.recordEvents(
                RecordEventsRequest.newBuilder().addAllEvents(events(prefix)).build());
        out.printf("recorded: %d accepted, %d duplicates%n", recorded.getAccepted(), recorded.getDuplicates());
        RecomputeResponse recompute = admin.recompute(RecomputeRequest.getDefaultInstance());
        out.printf("recomputed %s: %d products, version %d%n", recompute.getDate(), recompute.getProducts(), recompute.getVersion());

        // A walk by page token reads one version of the ranking however often it is republished.
        List<List<Long>> pages = new ArrayList<>();
        GetTopNRequest request = GetTopNRequest.newBuilder().setWindow(Window.WINDOW_DAILY).setLimit(5).build();
        while (true) {
            GetTopNResponse page = admin.getTopN(request);
            pages.add(ids(page.getProductsList()));
            for (RankedProduct p : page.getProductsList()) {
                out.printf("#%d product %d score %.9f%n", p.getRank(), p.getProductId(), p.getScore());
            }
            if (page.getNextPageToken().isEmpty()) {
                break;
            }
            request = GetTopNRequest.newBuilder().setPageToken(page.getNextPageToken()).build();
        }

        GetRankResponse rank = admin.getRank(GetRankRequest.newBuilder().setProductId(11).setNeighbors(1).build());
        out.printf("product 11 is #%d of %d (above: %s, below: %s)%n", rank.getProduct().getRank(), rank.getTotal(),
                ids(rank.getAboveList()), ids(rank.getBelowList()));

        ExplainRankResponse e = admin.explainRank(ExplainRankRequest.newBuilder().setProductId(12).build());
        out.printf("product 12: %d views (%d retracted), %d likes: %.1f + %.1f = %.3f%n", e.getViews(),
                e.getRetractedViews(), e.getLikes(), e.getViewPoints(), e.getLikePoints(), e.getMainScore());
        return new Seen(recorded, recompute, pages, rank, e);
    }

    private static List<Long> ids(List<RankedProduct> products) {
        return products.stream().map(RankedProduct::getProductId).toList();
    }

    public static void main(String[] args) {
        String endpoint = System.getenv().getOrDefault("RANKING_ENDPOINT", "127.0.0.1:50051");
        try (RankingClient writer = RankingClient.builder(endpoint).token(System.getenv("RANKING_WRITE_TOKEN")).build();
                RankingClient admin = RankingClient.builder(endpoint).token(System.getenv("RANKING_ADMIN_TOKEN")).build()) {
            run(writer, admin, "example-" + System.nanoTime(), System.out);
        }
    }
}
