//! `feed <redis-url> <brokers> [products]`: the ranking feed during live passes, off then on.

use chrono::Utc;

use super::{FEED_BATCHES_PER_SECOND, run, seeded};
use crate::bus::Popularity;

/// The feed during live passes: the same load with the feed off, then on (to a topic of
/// `brokers`), on `products` products: the publication phase's time in both, the feed's records
/// per second and its lag from publication to the closing record acknowledged.
pub async fn bench_feed(redis: &str, brokers: &str, products: i64) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;

    let pg = seeded(products, Popularity::Zipf).await;
    let topic = format!("bench-feed-{:x}", Utc::now().timestamp_micros());
    let admin: AdminClient<DefaultClientContext> =
        rdkafka::ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin");
    let topics = [NewTopic::new(&topic, 1, TopicReplication::Fixed(1))];
    admin.create_topics(&topics, &AdminOptions::new()).await.expect("create topic");
    let rate = FEED_BATCHES_PER_SECOND;
    let off = run(&pg, redis, products, "zipf", "1s", None, rate).await;
    let on = run(&pg, redis, products, "zipf", "1s", Some((brokers, &topic)), rate).await;
    println!(
        "\n## The ranking feed during live passes ({products} products, RANKING_LIVE_INTERVAL 1s, Zipf popularity)\n"
    );
    println!(
        "| feed | events/s | passes | publish phase ms (mean) | pass wall ms (mean) | feed records/s | publication → version acknowledged p50 / p99 ≤ ms | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|");
    for (name, f) in [("off", &off), ("on (Kafka, top 1,000)", &on)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.1} | {:.1} | {:.0} | {:.0} / {:.0} | |",
            f.events_per_second, f.passes, f.phases_ms[3], f.pass_ms, f.feed.0, f.feed.1, f.feed.2
        );
    }
    println!(
        "| on ÷ off | | | {:.2} | {:.2} | | | publication ≤ 1.05 ×; lag p99 ≤ 1,000 ms |",
        on.phases_ms[3] / off.phases_ms[3].max(1e-9),
        on.pass_ms / off.pass_ms.max(1e-9)
    );
}
