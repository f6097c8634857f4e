//! The application layer: one service per use case over the ports, and the policy they
//! share. Nothing here knows about gRPC, SQL or Redis; tests call these services without a
//! server.
//!
//! - [`policy`]: calendar, weights, windows of days and time constants, in one place.
//! - [`invalid`]: rejected input as a structured field path and a reason.
//! - [`ingest`]: validation, the durable SQL commit (with group commit), hourly increments.
//! - [`queries`]: the read rules (which ranking, which page) over the ranking store.
//! - [`catalog`]: UpdateCatalog (segments, hidden products; hiding takes effect at once).
//! - [`explain`]: ExplainRank, the one read that consults SQL (a product's rows only).
//! - [`recompute`]: SQL → score engine → atomic replace of a daily ranking; retention.
//! - [`snapshots`]: each replica's in-memory copies of the current ranking versions.
//! - [`page_token`]: the opaque position of a page in one version of a ranking.
//! - [`watch`]: WatchTopN's feeds, one per distinct watched top, shared by its watchers.
//! - [`scheduler`]: the periodic recompute and retention, one deterministic step at a time.

pub mod catalog;
pub mod explain;
pub mod ingest;
pub mod invalid;
pub mod page_token;
pub mod policy;
pub mod queries;
pub mod recompute;
pub mod scheduler;
pub mod snapshots;
pub mod watch;

/// Stand-ins shared by the application's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::sync::Arc;
    use std::time::Duration;

    use chrono::{DateTime, NaiveDate, Utc};

    use super::policy::{Clock, Policy};
    use super::queries::Queries;
    use super::recompute::Recompute;
    use super::snapshots::Snapshots;
    use crate::adapters::memory::MemoryRankingStore;
    use crate::domain::calendar::RankingCalendar;
    use crate::domain::score::Weights;
    use crate::metrics::Metrics;
    use crate::ports::StoreError;

    /// The services over an in-process ranking store and [`NoEvents`], in UTC, with the
    /// default weights and days, copies bounded at 1,000 entries.
    pub struct Wired {
        pub policy: Arc<Policy>,
        pub metrics: Arc<Metrics>,
        pub snapshots: Arc<Snapshots>,
        pub recompute: Arc<Recompute>,
    }

    impl Wired {
        pub fn new(store: &Arc<MemoryRankingStore>, clock: Clock) -> Self {
            let policy = Policy::new(RankingCalendar::new(chrono_tz::UTC), Weights::default(), 7, 8, 7, Duration::ZERO);
            let policy = Arc::new(policy.with_clock(clock));
            let metrics = Arc::new(Metrics::new());
            let snapshots = Arc::new(Snapshots::new(store.clone(), policy.clone(), metrics.clone(), 1_000));
            let recompute = Arc::new(Recompute::new(
                Arc::new(NoEvents),
                store.clone(),
                store.clone(),
                snapshots.clone(),
                policy.clone(),
                metrics.clone(),
                tokio_util::task::TaskTracker::new(),
            ));
            Self { policy, metrics, snapshots, recompute }
        }

        /// The read service over the same parts.
        pub fn queries(&self, store: &Arc<MemoryRankingStore>) -> Queries {
            Queries::new(store.clone(), self.snapshots.clone(), self.policy.clone(), self.recompute.clone())
        }
    }

    /// A SQL store with no events: a rebuild finds nothing to rank.
    pub struct NoEvents;

    #[async_trait::async_trait]
    impl crate::ports::MetricsStore for NoEvents {
        async fn record(&self, _: &[crate::ports::DatedEvent]) -> Result<Vec<crate::ports::Outcome>, StoreError> {
            Ok(Vec::new())
        }
        async fn scan_day(
            &self,
            _: NaiveDate,
            _: &mut (dyn FnMut(crate::ports::DailyRow) + Send),
        ) -> Result<u64, StoreError> {
            Ok(0)
        }
        async fn scan_days(
            &self,
            _: chrono::NaiveDate,
            _: chrono::NaiveDate,
            _: &mut (dyn FnMut(crate::ports::DailyRow) + Send),
        ) -> Result<u64, crate::ports::StoreError> {
            Ok(0)
        }
        async fn prune(&self, _: DateTime<Utc>, _: NaiveDate, _: u32) -> Result<u64, StoreError> {
            Ok(0)
        }
        async fn update_catalog(&self, _: &[crate::ports::CatalogEntry]) -> Result<(), crate::ports::StoreError> {
            Ok(())
        }
        async fn hidden_among(&self, _: &[i64]) -> Result<Vec<i64>, crate::ports::StoreError> {
            Ok(Vec::new())
        }
        async fn hidden_products(&self) -> Result<Vec<i64>, crate::ports::StoreError> {
            Ok(Vec::new())
        }
        async fn scan_catalog(
            &self,
            _: &mut (dyn FnMut(crate::ports::CatalogEntry) + Send),
        ) -> Result<u64, crate::ports::StoreError> {
            Ok(0)
        }
        async fn record_run(&self, _: &crate::ports::RankingRun) -> Result<(), crate::ports::StoreError> {
            Ok(())
        }
        async fn ranking_run(
            &self,
            _: chrono::NaiveDate,
        ) -> Result<Option<crate::ports::RankingRun>, crate::ports::StoreError> {
            Ok(None)
        }
        async fn product_days(
            &self,
            _: i64,
            _: &[chrono::NaiveDate],
        ) -> Result<Vec<crate::ports::ProductDay>, crate::ports::StoreError> {
            Ok(Vec::new())
        }
    }
}
