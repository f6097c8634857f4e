//! Distributed tracing end to end: a caller's span context travels through the client crate
//! (W3C `traceparent`) into the server binary, whose RPC span is exported over OTLP to a
//! receiver started here, under the caller's trace id.

use std::sync::{Arc, Mutex};

use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use ranking_client::{RankingClient, v1};
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

use crate::helpers::process::ServerProcess;

/// (trace id, span name) of an exported span.
type Exported = (Vec<u8>, String);

/// Collects every exported span.
#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Exported>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for resource in request.into_inner().resource_spans {
            for scope in resource.scope_spans {
                for span in scope.spans {
                    seen.push((span.trace_id, span.name));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_span_carries_the_callers_trace_id() {
    // The OTLP receiver.
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let otlp_port = listener.local_addr().expect("addr").port();
    let svc = TraceServiceServer::new(receiver.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );

    // The caller's tracing: spans get OpenTelemetry contexts (nothing is exported here).
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(provider.tracer("caller")));
    tracing::subscriber::set_global_default(subscriber).expect("one subscriber in this test binary");
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());

    let server =
        ServerProcess::start(&[("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://127.0.0.1:{otlp_port}"))]).await;
    let client = RankingClient::builder(format!("http://{}", server.addr))
        .retry(ranking_client::RetryPolicy { max_attempts: 50, ..Default::default() })
        .connect_lazy()
        .expect("client");
    let span = tracing::info_span!("caller");
    let trace_id = span.context().span().span_context().trace_id();
    assert_ne!(trace_id, opentelemetry::trace::TraceId::INVALID);
    client.top_n(v1::GetTopNRequest::default()).instrument(span).await.expect("call");

    // SIGTERM makes the server flush its spans on the way out: its exporter's shutdown waits
    // for the receiver's answer, which comes after the spans are stored, so they are all
    // here once the process has exited.
    server.terminate();
    assert_eq!(server.wait().await.code(), Some(0));
    let wanted = trace_id.to_bytes().to_vec();
    let found =
        receiver.0.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|(t, name)| *t == wanted && name == "rpc");
    let seen = receiver.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(found, "no exported rpc span with trace id {trace_id}; exported: {seen:?}");
}
