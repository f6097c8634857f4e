package ranking.client;

import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import ranking.v1.Ranking.GetAccessRequest;

/**
 * A real server for a test: the binary named by RANKING_SERVER_BIN, its own SQLite file, port
 * and tokens, stopped when closed.
 */
public final class TestServer implements AutoCloseable {
    public static final String READ_TOKEN = "java-client-read";
    public static final String WRITE_TOKEN = "java-client-write";
    public static final String ADMIN_TOKEN = "java-client-admin";

    public final String endpoint;
    private final Process process;
    private final Path dir;

    private TestServer(String endpoint, Process process, Path dir) {
        this.endpoint = endpoint;
        this.process = process;
        this.dir = dir;
    }

    public static TestServer start(Map<String, String> env) throws IOException, InterruptedException {
        String bin = System.getenv("RANKING_SERVER_BIN");
        if (bin == null || bin.isEmpty()) {
            throw new IllegalStateException("RANKING_SERVER_BIN names the ranking server binary the client is tested against");
        }
        Path dir = Files.createTempDirectory("ranking-java-client-");
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        String endpoint = "127.0.0.1:" + port;
        ProcessBuilder pb = new ProcessBuilder(bin);
        Map<String, String> e = pb.environment();
        e.clear();
        e.put("PATH", System.getenv().getOrDefault("PATH", ""));
        e.put("RANKING_LISTEN", endpoint);
        e.put("DATABASE_URL", "sqlite://" + dir.resolve("ranking.db") + "?mode=rwc");
        e.put("RANKING_READ_TOKEN", READ_TOKEN);
        e.put("RANKING_WRITE_TOKEN", WRITE_TOKEN);
        e.put("RANKING_ADMIN_TOKEN", ADMIN_TOKEN);
        e.put("RANKING_METRICS_LISTEN", "");
        e.put("RANKING_SHUTDOWN_GRACE", "1s");
        e.put("RUST_LOG", "warn");
        e.putAll(env);
        pb.redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.INHERIT);
        TestServer server = new TestServer(endpoint, pb.start(), dir);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        try (RankingClient probe = RankingClient.builder(endpoint)
                .deadline(Duration.ofSeconds(1))
                .retry(new RankingClient.RetryPolicy(1, Duration.ZERO, Duration.ZERO))
                .build()) {
            while (true) {
                try {
                    probe.getAccess(GetAccessRequest.getDefaultInstance());
                    return server;
                } catch (StatusRuntimeException notYet) {
                    if (!server.process.isAlive() || System.nanoTime() > deadline) {
                        server.close();
                        throw new IllegalStateException("the server did not answer", notYet);
                    }
                    Thread.sleep(50);
                }
            }
        }
    }

    @Override
    public void close() throws InterruptedException, IOException {
        process.destroy();
        if (!process.waitFor(10, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor();
        }
        try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        }
    }
}
