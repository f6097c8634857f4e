package ranking.client.kotlin

import io.grpc.Status
import io.grpc.StatusRuntimeException
import java.time.Duration
import java.util.concurrent.atomic.AtomicInteger
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.flow.first
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import ranking.client.RankingClient
import ranking.client.TestServer
import ranking.client.example.Tour
import ranking.v1.Ranking.*

/** The coroutine client against a real server: the tour's reads, a shed call retried, a wrong token refused. */
class RankingCoroutineClientTest {
    private fun client(endpoint: String, token: String, onRetry: RankingClient.RetryListener? = null): RankingCoroutineClient {
        val builder = RankingClient.builder(endpoint).token(token).deadline(Duration.ofSeconds(60))
            .retry(RankingClient.RetryPolicy(50, Duration.ofMillis(10), Duration.ofMillis(200)))
        if (onRetry != null) builder.onRetry(onRetry)
        return RankingCoroutineClient(builder.build())
    }

    @Test
    fun suspendCallsRecordRecomputeAndRead() = runBlocking {
        TestServer.start(mapOf()).use { server ->
            val writer = client(server.endpoint, TestServer.WRITE_TOKEN)
            val admin = client(server.endpoint, TestServer.ADMIN_TOKEN)
            try {
                val batch = Tour.events("kotlin-tour")
                val recorded = writer.recordEvents(RecordEventsRequest.newBuilder().addAllEvents(batch).build())
                assertEquals(batch.size, recorded.accepted)
                assertEquals(Tour.PRODUCTS.toLong(), admin.recompute(RecomputeRequest.getDefaultInstance()).products)
                val top = admin.getTopN(GetTopNRequest.newBuilder().setLimit(3).build())
                assertEquals(listOf(3L, 12L, 11L), top.productsList.map { it.productId })
                val rank = admin.getRank(GetRankRequest.newBuilder().setProductId(11).setNeighbors(1).build())
                assertEquals(listOf(12L, 10L), listOf(rank.getAbove(0).productId, rank.getBelow(0).productId))
                val explained = admin.explainRank(ExplainRankRequest.newBuilder().setProductId(12).build())
                assertEquals(listOf(11L, 1L, 1L), listOf(explained.views, explained.retractedViews, explained.likes))
                // The stream as a Flow: the current top at once.
                val watched = admin.watchTopN(WatchTopNRequest.newBuilder().setLimit(3).build()).first()
                assertEquals(listOf(3L, 12L, 11L), watched.productsList.map { it.productId })
            } finally {
                writer.client.close()
                admin.client.close()
            }
        }
    }

    @Test
    fun shedCallsAreRetriedUntilTaken() = runBlocking {
        TestServer.start(mapOf("RANKING_MAX_CONCURRENT_CALLS" to "1")).use { server ->
            val shed = AtomicInteger()
            val writer = client(server.endpoint, TestServer.WRITE_TOKEN) { _, _, cause, _ ->
                if (cause.status.code == Status.Code.RESOURCE_EXHAUSTED && RankingClient.retryAfter(cause).isPresent) shed.incrementAndGet()
            }
            try {
                val deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos()
                var round = 0
                while (shed.get() == 0) {
                    assertTrue(System.nanoTime() < deadline, "no call was shed in 60 s of crowds against a limit of one call")
                    val at = Tour.events("now")[0].occurredAt
                    val answers = coroutineScope {
                        (0 until 32).map { c ->
                            val batch = RecordEventsRequest.newBuilder()
                            for (i in 0 until 200) {
                                batch.addEvents(Event.newBuilder().setEventId("shed-$round-$c-$i").setProductId(1L + i)
                                    .setType(EventType.EVENT_TYPE_VIEW).setOccurredAt(at))
                            }
                            async { writer.recordEvents(batch.build()) }
                        }.awaitAll()
                    }
                    answers.forEach { assertEquals(200, it.accepted) }
                    round++
                }
            } finally {
                writer.client.close()
            }
        }
    }

    @Test
    fun aWrongTokenIsRefusedAndNotRetried() = runBlocking {
        TestServer.start(mapOf()).use { server ->
            val retries = AtomicInteger()
            val stranger = client(server.endpoint, "not-a-token") { _, _, _, _ -> retries.incrementAndGet() }
            try {
                val refused = assertThrows<StatusRuntimeException> { runBlocking { stranger.getTopN(GetTopNRequest.getDefaultInstance()) } }
                assertEquals(Status.Code.UNAUTHENTICATED, refused.status.code)
                assertEquals(0, retries.get())
            } finally {
                stranger.client.close()
            }
        }
    }
}
