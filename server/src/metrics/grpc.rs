//! The gRPC families: the service's own per-RPC calls and latency, and the
//! go-grpc-prometheus server families, unprefixed, that gRPC dashboards read.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-RPC metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// gRPC method name, e.g. `GetTopN`.
    pub method: &'static str,
    /// gRPC status code name, e.g. `Ok`, `InvalidArgument`.
    pub code: &'static str,
}

/// Labels of the go-grpc-prometheus families without a code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// `unary`, `server_stream`, `bidi_stream` (`unknown` for a path that is no RPC).
    pub grpc_type: &'static str,
    /// The full service name, `ranking.v1.RankingService`.
    pub grpc_service: &'static str,
    /// The method, `GetTopN`.
    pub grpc_method: &'static str,
}

/// Labels of `grpc_server_handled_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcCodeLabels {
    /// As [`GrpcLabels::grpc_type`].
    pub grpc_type: &'static str,
    /// As [`GrpcLabels::grpc_service`].
    pub grpc_service: &'static str,
    /// As [`GrpcLabels::grpc_method`].
    pub grpc_method: &'static str,
    /// The status code in Go's names: `OK`, `Canceled`, `InvalidArgument`, …
    pub grpc_code: &'static str,
}

/// The go-grpc-prometheus server families, unprefixed, so that existing gRPC
/// dashboards and alerts read this service as they read any Go gRPC server.
pub struct GrpcServerMetrics {
    /// `grpc_server_started_total`: calls started.
    pub started: Family<GrpcLabels, Counter>,
    /// `grpc_server_handled_total`: calls finished, by code.
    pub handled: Family<GrpcCodeLabels, Counter>,
    /// `grpc_server_msg_received_total`: request messages read.
    pub msg_received: Family<GrpcLabels, Counter>,
    /// `grpc_server_msg_sent_total`: response messages sent.
    pub msg_sent: Family<GrpcLabels, Counter>,
    /// `grpc_server_handling_seconds`: from the call's start to its end.
    pub handling_seconds: Family<GrpcLabels, Histogram>,
}

impl GrpcServerMetrics {
    /// The families registered in `registry`, with a zero series for every RPC of the
    /// table (and `handled` with code OK), so that rates and dashboards show every method
    /// from the first scrape on, as go-grpc-prometheus's `InitializeMetrics` does.
    pub fn registered(registry: &mut Registry, rpcs: &[GrpcLabels]) -> Self {
        let metrics = Self {
            started: Family::default(),
            handled: Family::default(),
            msg_received: Family::default(),
            msg_sent: Family::default(),
            // go-grpc-prometheus's default buckets (Prometheus's DefBuckets).
            handling_seconds: Family::new_with_constructor(|| {
                Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
            }),
        };
        for labels in rpcs {
            drop(metrics.started.get_or_create(labels));
            drop(metrics.msg_received.get_or_create(labels));
            drop(metrics.msg_sent.get_or_create(labels));
            drop(metrics.handling_seconds.get_or_create(labels));
            let ok = GrpcCodeLabels {
                grpc_type: labels.grpc_type,
                grpc_service: labels.grpc_service,
                grpc_method: labels.grpc_method,
                grpc_code: "OK",
            };
            drop(metrics.handled.get_or_create(&ok));
        }
        registry.register(
            "grpc_server_started",
            "Total number of RPCs started on the server.",
            metrics.started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure.",
            metrics.handled.clone(),
        );
        registry.register(
            "grpc_server_msg_received",
            "Total number of RPC stream messages received on the server.",
            metrics.msg_received.clone(),
        );
        registry.register(
            "grpc_server_msg_sent",
            "Total number of gRPC stream messages sent by the server.",
            metrics.msg_sent.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
            metrics.handling_seconds.clone(),
        );
        metrics
    }
}

/// The service's own per-RPC families (`ranking_rpc_*`).
pub struct RpcMetrics {
    /// Calls by method and status code.
    pub calls: Family<RpcLabels, Counter>,
    /// Call latency by method and status code, seconds.
    pub seconds: Family<RpcLabels, Histogram>,
}

impl RpcMetrics {
    /// The metrics, registered in `registry`.
    pub fn registered(registry: &mut Registry) -> Self {
        let calls = Family::<RpcLabels, Counter>::default();
        let seconds = Family::<RpcLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 18))
        });
        registry.register("rpc_calls", "gRPC calls by method and code", calls.clone());
        registry.register("rpc_duration_seconds", "gRPC call latency by method and code", seconds.clone());
        Self { calls, seconds }
    }

    /// Records one finished RPC.
    pub fn finished(&self, method: &'static str, code: &'static str, seconds: f64) {
        let labels = RpcLabels { method, code };
        self.calls.get_or_create(&labels).inc();
        self.seconds.get_or_create(&labels).observe(seconds);
    }
}
