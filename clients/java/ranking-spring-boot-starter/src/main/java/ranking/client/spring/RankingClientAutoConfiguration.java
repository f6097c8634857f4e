package ranking.client.spring;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import ranking.client.RankingClient;

/**
 * A {@link RankingClient} bean from {@code ranking.*} ({@link RankingProperties}) once
 * {@code ranking.endpoint} is set, unless the application defines its own. Spring closes it
 * with the context.
 */
@AutoConfiguration
@EnableConfigurationProperties(RankingProperties.class)
public class RankingClientAutoConfiguration {
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "ranking", name = "endpoint")
    public RankingClient rankingClient(RankingProperties properties) {
        RankingProperties.Retry retry = properties.getRetry();
        RankingClient.Builder builder = RankingClient.builder(properties.getEndpoint())
                .token(properties.getToken())
                .deadline(properties.getDeadline())
                .retry(new RankingClient.RetryPolicy(retry.getMaxAttempts(), retry.getBaseDelay(), retry.getMaxDelay()))
                .tls(properties.getTls().isEnabled());
        if (properties.getTls().getTrustCertificates() != null) {
            builder.trustCertificates(properties.getTls().getTrustCertificates());
        }
        return builder.build();
    }
}
