//! The gRPC listener's connections and the calls admitted on them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The connections' metrics.
pub struct ConnectionMetrics {
    /// Calls admitted and not finished.
    pub calls_in_flight: Gauge,
    /// Open gRPC connections.
    pub open: Gauge,
    /// Connections closed at once because `RANKING_MAX_CONNECTIONS` were open.
    pub refused: Counter,
    /// Connections closed by the handshake or idle timeout.
    pub timed_out: Counter,
    /// Idle connections closed to make room for a new one at the cap.
    pub evicted: Counter,
}

impl ConnectionMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let m = Self {
            calls_in_flight: Gauge::default(),
            open: Gauge::default(),
            refused: Counter::default(),
            timed_out: Counter::default(),
            evicted: Counter::default(),
        };
        registry.register("calls_in_flight", "gRPC calls admitted and not finished", m.calls_in_flight.clone());
        registry.register("connections_open", "Open gRPC connections", m.open.clone());
        registry.register(
            "connections_refused",
            "Connections closed on accept because RANKING_MAX_CONNECTIONS were open",
            m.refused.clone(),
        );
        registry.register(
            "connections_timed_out",
            "Connections closed by the handshake or idle timeout",
            m.timed_out.clone(),
        );
        registry.register(
            "connections_evicted",
            "Idle connections closed to make room for a new one at RANKING_MAX_CONNECTIONS",
            m.evicted.clone(),
        );
        m
    }
}
