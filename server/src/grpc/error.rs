//! The one mapping from failures to gRPC statuses.

use tonic::Status;

use crate::ingest::IngestError;
use crate::ports::StoreError;
use crate::recompute::RecomputeError;

/// A dependency failure: UNAVAILABLE, which tells callers the call may be retried (with the
/// same event ids, for writes).
pub fn store(e: &StoreError) -> Status {
    match e {
        StoreError::Unavailable { .. } => Status::unavailable(format!("{e}; retry later")),
        StoreError::Corrupt(_) => Status::internal(e.to_string()),
    }
}

impl From<IngestError> for Status {
    fn from(e: IngestError) -> Self {
        match &e {
            IngestError::Invalid { .. } | IngestError::TooLarge(_) => Status::invalid_argument(e.to_string()),
            IngestError::Store(s) => store(s),
        }
    }
}

impl From<RecomputeError> for Status {
    fn from(e: RecomputeError) -> Self {
        match &e {
            RecomputeError::Busy(_) => Status::unavailable(e.to_string()),
            RecomputeError::Store(s) => store(s),
        }
    }
}

impl From<StoreError> for Status {
    fn from(e: StoreError) -> Self {
        store(&e)
    }
}

/// INVALID_ARGUMENT naming the field.
pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {reason}"))
}
