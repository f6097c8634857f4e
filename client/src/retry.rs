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
    /// drawn at random between half and the whole of it, so that callers refused together
    /// do not come back together.
    pub base_delay: Duration,
    /// Upper bound of one delay.
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
    pub(crate) fn delay(&self, retry: u32) -> Duration {
        let cap = self.base_delay.saturating_mul(1 << retry.min(16)).min(self.max_delay);
        cap.mul_f64(rand::random_range(0.5..=1.0))
    }
}

/// Whether a failed call is worth repeating after a delay: the service could not be reached
/// (UNAVAILABLE, or a call that failed in the transport: a connection reset or closed under
/// it surfaces as UNKNOWN or CANCELLED with a transport error as its source), or it shed the
/// call and asked for a retry with backoff (RESOURCE_EXHAUSTED whose message says "retry";
/// one that refuses the request itself, such as a message over the size limit, is final).
/// Every call may be repeated: writes carry idempotent ids, reads and recomputes change
/// nothing a repeat could double.
pub fn retryable(status: &Status) -> bool {
    match status.code() {
        Code::Unavailable => true,
        Code::ResourceExhausted => status.message().contains("retry"),
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
        assert!(p.delay(0) <= Duration::from_millis(100) && p.delay(0) >= Duration::from_millis(50));
        assert!(p.delay(8) <= Duration::from_secs(1) && p.delay(8) >= Duration::from_millis(500));
    }

    #[test]
    fn shed_calls_are_retried_and_refused_requests_are_not() {
        assert!(retryable(&Status::unavailable("database unavailable; retry later")));
        assert!(retryable(&Status::resource_exhausted("server is at its concurrent-call limit; retry with backoff")));
        assert!(!retryable(&Status::resource_exhausted("request message larger than 8388608 bytes")));
        assert!(!retryable(&Status::invalid_argument("events[3].amount: must be 0 for VIEW")));
        assert!(!retryable(&Status::not_found("product 7 is not ranked")));
    }
}
