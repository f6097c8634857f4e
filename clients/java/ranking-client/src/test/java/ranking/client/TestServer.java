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
    /** The server's certificate (PEM) when it serves TLS, else null. */
    public final java.io.File certificate;
    private final Process process;
    private final Path dir;

    private TestServer(String endpoint, java.io.File certificate, Process process, Path dir) {
        this.endpoint = endpoint;
        this.certificate = certificate;
        this.process = process;
        this.dir = dir;
    }

    public static TestServer start(Map<String, String> env) throws IOException, InterruptedException {
        return start(env, false);
    }

    /** A server on TLS with a certificate for 127.0.0.1 made by openssl for the test. */
    public static TestServer startTls() throws IOException, InterruptedException {
        return start(Map.of(), true);
    }

    private static TestServer start(Map<String, String> env, boolean tls) throws IOException, InterruptedException {
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
        java.io.File certificate = null;
        if (tls) {
            Path cert = dir.resolve("cert.pem");
            Path key = dir.resolve("key.pem");
            Process openssl = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key.toString(), "-out", cert.toString(),
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
                    .redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .start();
            if (openssl.waitFor() != 0) {
                throw new IllegalStateException("openssl could not make the test's certificate");
            }
            certificate = cert.toFile();
            env = new java.util.HashMap<>(env);
            env.put("RANKING_TLS_CERT", cert.toString());
            env.put("RANKING_TLS_KEY", key.toString());
        }
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
        TestServer server = new TestServer(endpoint, certificate, pb.start(), dir);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        RankingClient.Builder probing = RankingClient.builder(endpoint)
                .deadline(Duration.ofSeconds(1))
                .retry(new RankingClient.RetryPolicy(1, Duration.ZERO, Duration.ZERO));
        if (certificate != null) {
            probing.trustCertificates(certificate);
        }
        try (RankingClient probe = probing.build()) {
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
