//! Which dead letters are repeats. Delivery to the dead-letter destination is at least once:
//! a record whose offset was not committed when its partition moved (or whose JetStream
//! termination was lost) is dead-lettered again by whoever consumes it next. Each dead letter
//! carries its `ranking-source`, so a consumer of the destination can drop a repeat; this
//! replica counts the repeats it makes itself, remembering the origins it dead-lettered
//! (bounded: the oldest are forgotten first). A repeat made by another replica after this one
//! died is counted there as a first delivery.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::metrics::bus::DeadLetterLabels;

/// Origins remembered per source: a burst of poison records larger than this counts some
/// repeats as first deliveries.
const REMEMBERED: u64 = 100_000;

/// The origins a source dead-lettered, and the count of its dead letters by delivery.
pub struct DeadLetterLog {
    sent: moka::sync::Cache<String, ()>,
    metrics: Arc<Metrics>,
    source: &'static str,
}

impl DeadLetterLog {
    pub fn new(metrics: Arc<Metrics>, source: &'static str) -> Self {
        Self { sent: moka::sync::Cache::new(REMEMBERED), metrics, source }
    }

    /// Notes that the record from `origin` reached the dead-letter destination.
    pub fn delivered(&self, origin: &str) {
        let again = self.sent.contains_key(origin);
        if !again {
            self.sent.insert(origin.to_owned(), ());
        }
        let delivery = if again { "again" } else { "first" };
        self.metrics.bus.dead_letters.get_or_create(&DeadLetterLabels { source: self.source, delivery }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(metrics: &Metrics, delivery: &'static str) -> u64 {
        metrics.bus.dead_letters.get_or_create(&DeadLetterLabels { source: "kafka", delivery }).get()
    }

    #[test]
    fn a_record_dead_lettered_twice_counts_once_as_first_then_as_again() {
        let metrics = Arc::new(Metrics::default());
        let log = DeadLetterLog::new(metrics.clone(), "kafka");
        log.delivered("events/0/41");
        log.delivered("events/1/41");
        log.delivered("events/0/41");
        assert_eq!((count(&metrics, "first"), count(&metrics, "again")), (2, 1));
    }
}
