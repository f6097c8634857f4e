package ranking.client.spring;

import java.io.File;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The {@code ranking.*} properties of the auto-configured {@link ranking.client.RankingClient}:
 *
 * <pre>
 * ranking.endpoint=ranking:50051
 * ranking.token=${RANKING_WRITE_TOKEN}
 * ranking.deadline=2s
 * ranking.tls.enabled=true
 * ranking.tls.trust-certificates=/etc/ranking/ca.pem
 * </pre>
 */
@ConfigurationProperties("ranking")
public class RankingProperties {
    /** host:port, or any gRPC target (dns:///ranking:50051). */
    private String endpoint;
    /** Bearer token of every call (write, read or admin, as the service's tokens are). */
    private String token;
    /** Deadline of every unary call, its retries included. */
    private Duration deadline = Duration.ofSeconds(10);
    private final Tls tls = new Tls();
    private final Retry retry = new Retry();

    public static class Tls {
        /** TLS, trusting the JVM's authorities unless trust-certificates names a PEM file. */
        private boolean enabled;
        private File trustCertificates;

        public boolean isEnabled() {
            return enabled;
        }

        public void setEnabled(boolean enabled) {
            this.enabled = enabled;
        }

        public File getTrustCertificates() {
            return trustCertificates;
        }

        public void setTrustCertificates(File trustCertificates) {
            this.trustCertificates = trustCertificates;
        }
    }

    public static class Retry {
        /** Attempts in all, the first included (1: no retry). */
        private int maxAttempts = 6;
        private Duration baseDelay = Duration.ofMillis(50);
        private Duration maxDelay = Duration.ofSeconds(2);

        public int getMaxAttempts() {
            return maxAttempts;
        }

        public void setMaxAttempts(int maxAttempts) {
            this.maxAttempts = maxAttempts;
        }

        public Duration getBaseDelay() {
            return baseDelay;
        }

        public void setBaseDelay(Duration baseDelay) {
            this.baseDelay = baseDelay;
        }

        public Duration getMaxDelay() {
            return maxDelay;
        }

        public void setMaxDelay(Duration maxDelay) {
            this.maxDelay = maxDelay;
        }
    }

    public String getEndpoint() {
        return endpoint;
    }

    public void setEndpoint(String endpoint) {
        this.endpoint = endpoint;
    }

    public String getToken() {
        return token;
    }

    public void setToken(String token) {
        this.token = token;
    }

    public Duration getDeadline() {
        return deadline;
    }

    public void setDeadline(Duration deadline) {
        this.deadline = deadline;
    }

    public Tls getTls() {
        return tls;
    }

    public Retry getRetry() {
        return retry;
    }
}
