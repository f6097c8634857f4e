package ranking.client.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import ranking.client.RankingClient;
import ranking.client.TestServer;
import ranking.v1.Ranking.GetAccessRequest;
import ranking.v1.Ranking.GetAccessResponse;

/** The bean from ranking.* properties, calling a real server with the configured token. */
class RankingClientAutoConfigurationTest {
    private final ApplicationContextRunner runner =
            new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RankingClientAutoConfiguration.class));

    @Test
    void aClientBeanFromTheRankingPropertiesCallsTheServerWithItsToken() throws Exception {
        try (TestServer server = TestServer.start(Map.of())) {
            runner.withPropertyValues(
                            "ranking.endpoint=" + server.endpoint,
                            "ranking.token=" + TestServer.ADMIN_TOKEN,
                            "ranking.deadline=5s",
                            "ranking.retry.max-attempts=3")
                    .run(context -> {
                        assertThat(context).hasSingleBean(RankingClient.class);
                        assertThat(context.getBean(RankingProperties.class).getDeadline()).hasSeconds(5);
                        GetAccessResponse access =
                                context.getBean(RankingClient.class).getAccess(GetAccessRequest.getDefaultInstance());
                        // The admin token opens the reads and Recompute, not the writes.
                        assertThat(access.getAdmin()).isTrue();
                        assertThat(access.getRead()).isTrue();
                        assertThat(access.getWrite()).isFalse();
                    });
        }
    }

    @Test
    void noEndpointNoBean() {
        runner.run(context -> assertThat(context).doesNotHaveBean(RankingClient.class));
    }

    @Test
    void anApplicationsOwnClientWins() {
        RankingClient own = RankingClient.builder("127.0.0.1:1").build();
        runner.withPropertyValues("ranking.endpoint=127.0.0.1:2")
                .withBean(RankingClient.class, () -> own)
                .run(context -> assertThat(context.getBean(RankingClient.class)).isSameAs(own));
        own.close();
    }
}
