//! The one mapping from application failures to gRPC statuses, and the rendering of
//! field paths (`events[3].amount`) in INVALID_ARGUMENT messages.

use tonic::Status;

use crate::app::catalog::CatalogError;
use crate::app::controls::ControlError;
use crate::app::history::HistoryError;
use crate::app::ingest::IngestError;
use crate::app::invalid::{Invalid, quote};
use crate::app::profiles::RouteError;
use crate::app::queries::QueryError;
use crate::app::recompute::RecomputeError;
use crate::app::watch::WatchError;
use crate::ports::StoreError;

/// How long a caller whose call was shed should wait before its retry: calls end within
/// milliseconds, so a slot is soon free; the caller's own backoff grows from there.
pub const SHED_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(50);

/// Load shed: RESOURCE_EXHAUSTED carrying a `google.rpc.RetryInfo` detail that says when to
/// retry, which is how a caller tells a shed call (retry it) from a refused request such as
/// one over the size limit (do not).
pub fn shed(message: &str) -> Status {
    use tonic_types::{ErrorDetails, StatusExt};
    Status::with_error_details(
        tonic::Code::ResourceExhausted,
        message,
        ErrorDetails::with_retry_info(Some(SHED_RETRY_AFTER)),
    )
}

/// A dependency failure: UNAVAILABLE, which tells callers the call may be retried (with the
/// same event ids, for writes).
pub fn store(e: &StoreError) -> Status {
    match e {
        StoreError::Unavailable { .. } | StoreError::LostLease { .. } | StoreError::Layout { .. } => {
            Status::unavailable(format!("{e}; retry later"))
        }
        StoreError::Exceeds(_) => Status::resource_exhausted(e.to_string()),
        StoreError::Corrupt(_) => Status::internal(e.to_string()),
        // Ingest answers these as the field of the event at fault; any other caller's is a
        // refusal all the same.
        StoreError::Refused { .. } => Status::invalid_argument(e.to_string()),
    }
}

impl From<RouteError> for Status {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::UnknownProfile(name) => Status::not_found(format!("no scoring profile {}", quote(&name))),
            RouteError::ActorTooLong(n) => Invalid::field(
                "actor_id",
                format!("must be at most {} bytes, got {n}", crate::app::profiles::MAX_ACTOR_ID),
            )
            .into(),
        }
    }
}

impl From<Invalid> for Status {
    fn from(e: Invalid) -> Self {
        Status::invalid_argument(e.message())
    }
}

impl From<ControlError> for Status {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Invalid(invalid) => invalid.into(),
            ControlError::Conflict { .. } => Status::failed_precondition(e.to_string()),
            ControlError::Exceeded { .. } => Status::resource_exhausted(e.to_string()),
            ControlError::Store(s) => store(&s),
            ControlError::Query(q) => q.into(),
        }
    }
}

impl From<IngestError> for Status {
    fn from(e: IngestError) -> Self {
        match e {
            IngestError::Invalid(invalid) => invalid.into(),
            IngestError::Store(s) => store(&s),
            IngestError::ShuttingDown => Status::unavailable("the server is shutting down; retry on another replica"),
        }
    }
}

impl From<RecomputeError> for Status {
    fn from(e: RecomputeError) -> Self {
        match e {
            RecomputeError::Invalid(invalid) => invalid.into(),
            RecomputeError::Busy(_) | RecomputeError::Abandoned => Status::unavailable(e.to_string()),
            RecomputeError::Store(s) => store(&s),
        }
    }
}

impl From<QueryError> for Status {
    fn from(e: QueryError) -> Self {
        match e {
            QueryError::Invalid(invalid) => invalid.into(),
            QueryError::NotRanked { .. } => Status::not_found(e.to_string()),
            QueryError::Expired { .. } => Status::failed_precondition(e.to_string()),
            QueryError::Unexplained { .. } => Status::unavailable(e.to_string()),
            QueryError::Store(s) => store(&s),
            QueryError::Rebuild(r) => r.into(),
        }
    }
}

impl From<CatalogError> for Status {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Invalid(invalid) => invalid.into(),
            CatalogError::Store(s) => store(&s),
            // As a recompute's failures map: the same store failure, the same code.
            CatalogError::Withdrawal(withdrawal) => withdrawal.into(),
        }
    }
}

impl From<WatchError> for Status {
    fn from(e: WatchError) -> Self {
        match e {
            WatchError::Invalid(invalid) => invalid.into(),
            WatchError::Full(_) => Status::resource_exhausted(e.to_string()),
            WatchError::Closing => Status::unavailable(e.to_string()),
            WatchError::Query(q) => q.into(),
        }
    }
}

impl From<HistoryError> for Status {
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::Invalid(invalid) => invalid.into(),
            HistoryError::UnknownProfile(name) => RouteError::UnknownProfile(name).into(),
            HistoryError::Store(s) => store(&s),
        }
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        store(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_the_wire_fields() {
        let e = Invalid::field("amount", "must be 0 for VIEW").within_element("events", 3);
        assert_eq!(Status::from(e).message(), "events[3].amount: must be 0 for VIEW");
        let e = Invalid::field("occurred_at", "is required").within("event");
        assert_eq!(Status::from(e).message(), "event.occurred_at: is required");
        let s = Status::from(Invalid::field("date", "x"));
        assert_eq!((s.code(), s.message()), (tonic::Code::InvalidArgument, "date: x"));
    }
}
