//! WatchTopN's streams and what they sent.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// WatchTopN's metrics.
pub struct WatchMetrics {
    /// Streams open.
    pub streams: Gauge,
    /// Messages sent.
    pub messages: Counter,
    /// States a slow reader never saw (it got a later one instead).
    pub skipped: Counter,
}

impl WatchMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self { streams: Gauge::default(), messages: Counter::default(), skipped: Counter::default() };
        registry.register("watch_streams", "WatchTopN streams open", m.streams.clone());
        registry.register("watch_messages", "WatchTopN messages sent", m.messages.clone());
        registry.register(
            "watch_skipped",
            "States a slow WatchTopN reader never saw (it got a later one instead)",
            m.skipped.clone(),
        );
        m
    }
}
