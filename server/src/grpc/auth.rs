//! Optional bearer tokens per class of call (the RPC table, [`crate::grpc::rpcs`]), as a
//! tower layer in front of the service.
//!
//! Writes (RecordEvent, RecordEvents, UpdateCatalog) take `RANKING_WRITE_TOKEN`, Recompute
//! takes `RANKING_ADMIN_TOKEN`, reads (GetTopN, GetRank, GetRanks, ListMovers, ExplainRank,
//! WatchTopN) take `RANKING_READ_TOKEN`; a class whose token is unset stays open. The admin
//! token also opens the reads and UpdateCatalog, so one token serves an operator (or the web
//! console) for looking, correcting the catalog and recomputing; recording events stays with
//! the write token. Health and
//! reflection are always open, so probes and grpcurl keep working; so is GetAccess, which
//! tells a caller what its own token opens ([`AccessPolicy::opens`]), and a path that is no
//! RPC of this server (the router answers UNIMPLEMENTED). A missing or wrong token is
//! UNAUTHENTICATED before any work is done.

use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::codegen::http;
use tower::{Layer, Service};

use super::rpcs::{self, Class};
use crate::config::Secret;

/// Which token each kind of call needs.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    /// For the writes ([`Class::Write`], [`Class::Catalog`]).
    pub write: Option<Secret>,
    /// For Recompute ([`Class::Admin`]).
    pub admin: Option<Secret>,
    /// For the reads ([`Class::Read`]).
    pub read: Option<Secret>,
}

impl AccessPolicy {
    /// The token a class of calls needs, if any, and whether the admin token opens it too.
    fn required(&self, class: Class) -> Option<(&Secret, bool)> {
        match class {
            Class::Write => self.write.as_ref().map(|s| (s, false)),
            Class::Catalog => self.write.as_ref().map(|s| (s, true)),
            Class::Admin => self.admin.as_ref().map(|s| (s, true)),
            Class::Read => self.read.as_ref().map(|s| (s, true)),
            Class::Health | Class::Reflection | Class::Access => None,
        }
    }

    /// Whether `token` (the bearer token of a call, if it has one) opens calls of `class`.
    pub fn opens(&self, class: Class, token: Option<&[u8]>) -> bool {
        let Some((secret, admin_too)) = self.required(class) else { return true };
        let Some(token) = token else { return false };
        secret.matches(token) || (admin_too && self.admin.as_ref().is_some_and(|admin| admin.matches(token)))
    }

    /// Whether the policy lets the request through.
    fn admits<B>(&self, request: &http::Request<B>) -> Result<(), &'static str> {
        let Some(rpc) = rpcs::called(request) else { return Ok(()) };
        if self.required(rpc.class).is_none() {
            return Ok(());
        }
        let header = request.headers().get(http::header::AUTHORIZATION).ok_or("missing bearer token")?;
        let token = bearer(header.as_bytes())?;
        if self.opens(rpc.class, Some(token)) { Ok(()) } else { Err("invalid bearer token") }
    }
}

/// The token of an authorization header's value, which must be `Bearer <token>`.
pub fn bearer(header: &[u8]) -> Result<&[u8], &'static str> {
    header.strip_prefix(b"Bearer ").ok_or("authorization must be 'Bearer <token>'")
}

/// Applies an [`AccessPolicy`].
#[derive(Clone)]
pub struct AuthLayer {
    policy: Arc<AccessPolicy>,
}

impl AuthLayer {
    /// A layer enforcing `policy`.
    pub fn new(policy: AccessPolicy) -> Self {
        Self { policy: Arc::new(policy) }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Auth { inner, policy: self.policy.clone() }
    }
}

/// The service of [`AuthLayer`].
#[derive(Clone)]
pub struct Auth<S> {
    inner: S,
    policy: Arc<AccessPolicy>,
}

impl<S, B, RB> Service<http::Request<B>> for Auth<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    RB: Default + Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        futures_util::future::Either<S::Future, futures_util::future::Ready<Result<Self::Response, Self::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match self.policy.admits(&request) {
            Ok(()) => futures_util::future::Either::Left(self.inner.call(request)),
            Err(why) => futures_util::future::Either::Right(futures_util::future::ready(Ok(
                tonic::Status::unauthenticated(why).into_http(),
            ))),
        }
    }
}
