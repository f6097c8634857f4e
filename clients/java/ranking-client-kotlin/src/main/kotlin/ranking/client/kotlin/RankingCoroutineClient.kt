package ranking.client.kotlin

import io.grpc.StatusException
import io.grpc.StatusRuntimeException
import java.time.Duration
import java.util.concurrent.TimeUnit
import kotlin.random.Random
import kotlinx.coroutines.delay
import kotlinx.coroutines.flow.Flow
import ranking.client.RankingClient
import ranking.v1.Ranking.*
import ranking.v1.RankingServiceGrpcKt.RankingServiceCoroutineStub

/**
 * The Kotlin surface of [RankingClient]: the grpc-kotlin coroutine stub over the client's
 * channel (the token on every call), and a suspend function per unary RPC with the client's
 * deadline and its retry of shed and unavailable calls, waiting with [delay] rather than a
 * blocked thread.
 *
 * ```
 * val ranking = RankingCoroutineClient(RankingClient.builder("ranking:50051").token(token).build())
 * val top = ranking.getTopN(getTopNRequest { limit = 10 })
 * ```
 */
class RankingCoroutineClient(val client: RankingClient) {
    /** The generated coroutine stub, with the token; the deadline and retry are [call]'s. */
    val stub: RankingServiceCoroutineStub = RankingServiceCoroutineStub(client.channel())

    /**
     * Calls [rpc] with the client's deadline, repeating it while [RankingClient.retryable]
     * and the attempts and the deadline allow: no wait starts that would end past the deadline.
     */
    suspend fun <T> call(method: String, rpc: suspend (RankingServiceCoroutineStub) -> T): T {
        val deadline = io.grpc.Deadline.after(client.deadline().toNanos(), TimeUnit.NANOSECONDS)
        val policy = client.retryPolicy()
        var delayNanos = policy.baseDelay.toNanos()
        var attempt = 1
        while (true) {
            val failure = try {
                return rpc(stub.withDeadline(deadline))
            } catch (e: StatusException) {
                StatusRuntimeException(e.status, e.trailers)
            } catch (e: StatusRuntimeException) {
                e
            }
            if (attempt >= policy.maxAttempts || !RankingClient.retryable(failure)) throw failure
            var wait = delayNanos + Random.nextLong(delayNanos + 1)
            wait = maxOf(wait, RankingClient.retryAfter(failure).map(Duration::toNanos).orElse(0L))
            if (deadline.timeRemaining(TimeUnit.NANOSECONDS) <= wait) throw failure
            attempt++
            client.retryListener().retrying(method, attempt, failure, Duration.ofNanos(wait))
            delay(wait / 1_000_000)
            delayNanos = minOf(2 * delayNanos, policy.maxDelay.toNanos())
        }
    }

    suspend fun recordEvent(request: RecordEventRequest): RecordEventResponse = call("RecordEvent") { it.recordEvent(request) }
    suspend fun recordEvents(request: RecordEventsRequest): RecordEventsResponse = call("RecordEvents") { it.recordEvents(request) }
    suspend fun getTopN(request: GetTopNRequest): GetTopNResponse = call("GetTopN") { it.getTopN(request) }
    suspend fun getRank(request: GetRankRequest): GetRankResponse = call("GetRank") { it.getRank(request) }
    suspend fun getRanks(request: GetRanksRequest): GetRanksResponse = call("GetRanks") { it.getRanks(request) }
    suspend fun listMovers(request: ListMoversRequest): ListMoversResponse = call("ListMovers") { it.listMovers(request) }
    suspend fun recompute(request: RecomputeRequest): RecomputeResponse = call("Recompute") { it.recompute(request) }
    suspend fun updateCatalog(request: UpdateCatalogRequest): UpdateCatalogResponse = call("UpdateCatalog") { it.updateCatalog(request) }
    suspend fun explainRank(request: ExplainRankRequest): ExplainRankResponse = call("ExplainRank") { it.explainRank(request) }
    suspend fun getAccess(request: GetAccessRequest): GetAccessResponse = call("GetAccess") { it.getAccess(request) }
    suspend fun putControl(request: PutControlRequest): PutControlResponse = call("PutControl") { it.putControl(request) }
    suspend fun getCatalog(request: GetCatalogRequest): GetCatalogResponse = call("GetCatalog") { it.getCatalog(request) }
    suspend fun deleteControl(request: DeleteControlRequest): DeleteControlResponse = call("DeleteControl") { it.deleteControl(request) }
    suspend fun listControls(request: ListControlsRequest): ListControlsResponse = call("ListControls") { it.listControls(request) }
    suspend fun previewTopN(request: PreviewTopNRequest): GetTopNResponse = call("PreviewTopN") { it.previewTopN(request) }
    suspend fun getRankHistory(request: GetRankHistoryRequest): GetRankHistoryResponse = call("GetRankHistory") { it.getRankHistory(request) }
    suspend fun compareRankings(request: CompareRankingsRequest): CompareRankingsResponse = call("CompareRankings") { it.compareRankings(request) }
    suspend fun getStatus(request: GetStatusRequest): GetStatusResponse = call("GetStatus") { it.getStatus(request) }

    /** WatchTopN as a [Flow]: no deadline, no retry (collect it again when it ends). */
    fun watchTopN(request: WatchTopNRequest): Flow<WatchTopNResponse> = stub.watchTopN(request)
}
