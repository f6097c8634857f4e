//! The [`RankingClient`] and how one is built: endpoint, timeouts, TLS, the bearer token and
//! W3C trace context on every call, the retry policy. Its calls are [`crate::calls`]' and
//! [`crate::streams`]'.

use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status};

use crate::{Inner, RankingServiceClient, RetryPolicy};

/// Adds `authorization: Bearer <token>` and the W3C trace context of the current tracing
/// span (`traceparent`) to every call, so the service's spans join the caller's trace.
#[derive(Clone, Default)]
pub struct CallMetadata(Option<MetadataValue<Ascii>>);

impl Interceptor for CallMetadata {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        let context = tracing_opentelemetry::OpenTelemetrySpanExt::context(&tracing::Span::current());
        opentelemetry::global::get_text_map_propagator(|p| {
            p.inject_context(&context, &mut MetadataInjector(request.metadata_mut()));
        });
        Ok(request)
    }
}

/// Writes propagation fields into gRPC metadata.
struct MetadataInjector<'a>(&'a mut tonic::metadata::MetadataMap);

impl opentelemetry::propagation::Injector for MetadataInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(key), Ok(value)) =
            (tonic::metadata::MetadataKey::from_bytes(key.as_bytes()), MetadataValue::try_from(value.as_str()))
        {
            self.0.insert(key, value);
        }
    }
}

/// Why a client could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The endpoint or TLS settings were rejected, or the first connection failed.
    Transport(tonic::transport::Error),
    /// The token is not valid header text.
    InvalidToken,
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "cannot reach the ranking service: {e}"),
            Self::InvalidToken => f.write_str("the bearer token must be visible ASCII"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport(e) => Some(e),
            Self::InvalidToken => None,
        }
    }
}

impl From<tonic::transport::Error> for BuildError {
    fn from(e: tonic::transport::Error) -> Self {
        Self::Transport(e)
    }
}

/// The ranking service client. Cheap to clone: clones share the connection.
///
/// Every unary call has one shape: it takes its request message (or what converts into it:
/// an event, a list of events, a product id, a date, see [`ranking_proto`]'s `From` impls)
/// and answers its response message, whose enum fields read typed through prost's
/// accessors (`response.outcome()`). Calls take `&self`: each attempt runs on a clone of
/// the shared channel. Requests over the service's bounds are split: more than
/// [`MAX_BATCH`] events or catalog entries, more than [`MAX_PRODUCT_IDS`] ids.
#[derive(Clone)]
pub struct RankingClient {
    pub(crate) inner: Inner,
    pub(crate) retry: RetryPolicy,
}

impl RankingClient {
    pub(crate) fn new(inner: Inner, retry: RetryPolicy) -> Self {
        Self { inner, retry }
    }

    /// The retry policy of every call.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    /// The generated client, for calls without the retry policy.
    pub fn raw(&self) -> Inner {
        self.inner.clone()
    }

    /// Starts building a client for `endpoint` (`http://host:port` or `https://…`).
    pub fn builder(endpoint: impl Into<String>) -> RankingClientBuilder {
        RankingClientBuilder::new(endpoint.into())
    }
}

/// Settings of a [`RankingClient`].
#[derive(Debug, Clone)]
pub struct RankingClientBuilder {
    endpoint: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    token: Option<String>,
    tls: Option<ClientTlsConfig>,
    pub(crate) retry: RetryPolicy,
}

impl RankingClientBuilder {
    /// The defaults for `endpoint`: 5 s to connect, 10 s per attempt, no token, plaintext,
    /// the default retry policy.
    pub(crate) fn new(endpoint: String) -> Self {
        Self {
            endpoint,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            token: None,
            tls: None,
            retry: RetryPolicy::default(),
        }
    }

    /// Time to establish a connection (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Deadline of each attempt of a call (default 10 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sends `authorization: Bearer <token>` with every call.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Speaks TLS (use an `https://` endpoint); the config carries the CA and, for mutual
    /// TLS, the client identity.
    pub fn tls(mut self, tls: ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Replaces the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    fn endpoint(&self) -> Result<Endpoint, BuildError> {
        let mut endpoint = Endpoint::from_shared(self.endpoint.clone())?
            .connect_timeout(self.connect_timeout)
            .timeout(self.request_timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &self.tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        Ok(endpoint)
    }

    fn wrap(&self, channel: Channel) -> Result<RankingClient, BuildError> {
        let token = match &self.token {
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| BuildError::InvalidToken)?),
            None => None,
        };
        Ok(RankingClient::new(RankingServiceClient::with_interceptor(channel, CallMetadata(token)), self.retry))
    }

    /// Connects now; fails when the service cannot be reached.
    pub async fn connect(self) -> Result<RankingClient, BuildError> {
        let channel = self.endpoint()?.connect().await?;
        self.wrap(channel)
    }

    /// Connects on first use (and reconnects after failures) without failing here.
    pub fn connect_lazy(self) -> Result<RankingClient, BuildError> {
        let channel = self.endpoint()?.connect_lazy();
        self.wrap(channel)
    }
}
