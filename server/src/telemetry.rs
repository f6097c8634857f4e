//! Logging and tracing: one subscriber filtered by `RUST_LOG` (default `info`), plus
//! OpenTelemetry export over OTLP/gRPC when `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//!
//! W3C trace context (`traceparent`) is the propagation format: the per-RPC span continues
//! the caller's trace (see `grpc::layers`), so a request can be followed from a sibling
//! service into this one.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Flushes and stops trace export when dropped (at the end of `main`).
#[must_use = "dropping the guard stops trace export"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("trace export did not shut down cleanly: {e}");
        }
    }
}

/// Installs the global subscriber. Calling it twice is harmless (tests do); only the first
/// call's settings apply.
pub fn init(default_filter: &str) -> TelemetryGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    // Colours only for a person at a terminal: log collectors get plain text, and the per-call
    // span fields are not wrapped in escape codes on every RPC.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let fmt = tracing_subscriber::fmt::layer().with_target(false).with_ansi(ansi);
    let provider = otlp_provider();
    let otel = provider.as_ref().map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("ranking-server")));
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let installed = tracing_subscriber::registry().with(filter).with(fmt).with(otel).try_init().is_ok();
    TelemetryGuard { provider: provider.filter(|_| installed) }
}

/// An OTLP exporter to `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter reads the standard
/// `OTEL_EXPORTER_OTLP_*` variables itself), or `None` when the variable is unset.
fn otlp_provider() -> Option<SdkTracerProvider> {
    std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok().filter(|v| !v.is_empty())?;
    let exporter = match opentelemetry_otlp::SpanExporter::builder().with_tonic().build() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("OpenTelemetry export disabled: {e}");
            return None;
        }
    };
    let resource = opentelemetry_sdk::Resource::builder().with_service_name("ranking-server").build();
    Some(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}
