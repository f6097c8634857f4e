//! When and how long to wait before repeating a call: the retry policy and what is worth
//! retrying.

use std::time::Duration;

use tonic::{Code, Status};

/// How often, and how patiently, to retry a call that found the service unavailable or
/// shedding load ([`retryable`]).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled each time (capped at `max_delay`), each delay
    /// stretched at random by up to its own length, so that callers refused together do not
    /// come back together. A shed call waits at least what the service's RetryInfo says.
    pub base_delay: Duration,
    /// Upper bound of one delay before its random stretch.
    pub max_delay: Duration,
    /// The longest a call may spend retrying, from its first attempt: no retry starts that
    /// would wait past it (each attempt's own deadline is the builder's request timeout).
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 6,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(2),
            deadline: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The delays before each retry, `max_attempts - 1` of them.
    pub(crate) fn delays(&self) -> backon::ExponentialBackoff {
        use backon::BackoffBuilder;
        backon::ExponentialBuilder::default()
            .with_min_delay(self.base_delay)
            .with_max_delay(self.max_delay)
            .with_jitter()
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
            .build()
    }
}

/// The wait before repeating a call that failed with `status`: the next of `delays`, and no
/// shorter than the service asked; `None` when the status is final or the retries are spent.
pub(crate) fn next_wait(delays: &mut backon::ExponentialBackoff, status: &Status) -> Option<Duration> {
    if !retryable(status) {
        return None;
    }
    Some(delays.next()?.max(retry_after(status).unwrap_or_default()))
}

/// What the service asked a shed call to wait (its `google.rpc.RetryInfo`), if anything.
pub fn retry_after(status: &Status) -> Option<Duration> {
    use tonic_types::StatusExt;
    status.get_details_retry_info().and_then(|info| info.retry_delay)
}

/// Whether a failed call is worth repeating after a delay: the service could not be reached
/// (UNAVAILABLE, or a call that failed in the transport: a connection reset or closed under
/// it surfaces as UNKNOWN or CANCELLED with a transport error as its source), or it shed the
/// call and said when to retry (RESOURCE_EXHAUSTED with a RetryInfo detail; one without,
/// which refuses the request itself, such as a message over the size limit, is final).
/// Every call may be repeated: writes carry idempotent ids, reads and recomputes change
/// nothing a repeat could double.
pub fn retryable(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable => true,
        Code::ResourceExhausted => retry_after(status).is_some(),
        _ => std::error::Error::source(status).is_some_and(|e| e.downcast_ref::<tonic::transport::Error>().is_some()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_grow_and_stay_bounded() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            deadline: Duration::from_secs(30),
        };
        let delays: Vec<Duration> = p.delays().collect();
        assert_eq!(delays.len(), 9, "one delay before each retry");
        assert!(delays[0] >= Duration::from_millis(100) && delays[0] < Duration::from_millis(200));
        assert!(delays[8] >= Duration::from_secs(1) && delays[8] < Duration::from_secs(2));
    }

    fn shed(message: &str) -> Status {
        use tonic_types::{ErrorDetails, StatusExt};
        let details = ErrorDetails::with_retry_info(Some(Duration::from_millis(50)));
        Status::with_error_details(Code::ResourceExhausted, message, details)
    }

    #[test]
    fn shed_calls_are_retried_and_refused_requests_are_not() {
        assert!(retryable(&Status::unavailable("database unavailable; retry later")));
        assert!(retryable(&shed("server is at its concurrent-call limit; retry with backoff")));
        assert_eq!(retry_after(&shed("busy")), Some(Duration::from_millis(50)));
        // Without RetryInfo, whatever its message says, RESOURCE_EXHAUSTED is final.
        assert!(!retryable(&Status::resource_exhausted("at the limit; retry with backoff")));
        assert!(!retryable(&Status::resource_exhausted("request message larger than 8388608 bytes")));
        assert!(!retryable(&Status::invalid_argument("events[3].amount: must be 0 for VIEW")));
        assert!(!retryable(&Status::not_found("product 7 is not ranked")));
    }
}
