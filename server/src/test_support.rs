//! Fixtures shared by the unit tests, the integration tests (`tests/it`) and the benchmarks
//! (`benches/service`): the application's services wired over an in-process ranking store
//! and a SQL store with no events, days and instants relative to today, the generous
//! deadline of a state that must be reached, and raw gRPC requests for hostile-peer tests.
//! Compiled only for tests and with the `test-support` feature, never into a release build.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};

use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::{Clock, Policy, PolicySettings};
use crate::app::queries::Queries;
use crate::app::recompute::Recompute;
use crate::app::snapshots::Snapshots;
use crate::metrics::Metrics;
use crate::ports::{CatalogRows, ChangeFeed, DayScans, EventLedger, RunLog, StoreError};

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
        Self::bounded(store, clock, 1_000)
    }

    /// The same with copies bounded at `max_entries` entries.
    pub fn bounded(store: &Arc<MemoryRankingStore>, clock: Clock, max_entries: usize) -> Self {
        let policy = Policy::new(PolicySettings { recompute_interval: Duration::ZERO, ..PolicySettings::default() });
        let policy = Arc::new(policy.with_clock(clock));
        let metrics = Arc::new(Metrics::new());
        let snapshots = Arc::new(Snapshots::new(store.clone(), policy.clone(), metrics.clone(), max_entries));
        let stores =
            crate::app::recompute::Stores { sql: Arc::new(NoEvents), rankings: store.clone(), leases: store.clone() };
        let recompute = Arc::new(Recompute::new(
            stores,
            snapshots.clone(),
            policy.clone(),
            metrics.clone(),
            tokio_util::task::TaskTracker::new(),
            Arc::new(feeder_off(policy.clone(), metrics.clone())),
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
impl EventLedger for NoEvents {
    async fn record(
        &self,
        _: &[crate::ports::DatedEvent],
        _: crate::ports::RecordRules<'_>,
    ) -> Result<crate::ports::Recorded, StoreError> {
        Ok(crate::ports::Recorded::default())
    }

    async fn register_signals(&self, _: &[String]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn prune(&self, _: DateTime<Utc>, _: NaiveDate, _: u32) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// No history is kept: every day is kept first, and none is there to read.
#[async_trait::async_trait]
impl crate::ports::HistoryRows for NoEvents {
    async fn keep_day(
        &self,
        _: crate::domain::board::Board<'_>,
        _: NaiveDate,
        _: u64,
        _: &[u8],
        _: i64,
    ) -> Result<crate::ports::Kept, crate::ports::StoreError> {
        Ok(crate::ports::Kept::First)
    }

    async fn kept_days(
        &self,
        _: crate::domain::board::Board<'_>,
    ) -> Result<Vec<crate::domain::history::KeptDay>, crate::ports::StoreError> {
        Ok(Vec::new())
    }

    async fn prune_history(&self, _: NaiveDate) -> Result<u64, crate::ports::StoreError> {
        Ok(0)
    }
}

/// No controls are ever stored: a put is refused as the database being down would be.
#[async_trait::async_trait]
impl crate::ports::ControlRows for NoEvents {
    async fn put_control(
        &self,
        _: crate::domain::controls::Control,
        _: u64,
        _: i64,
    ) -> Result<crate::ports::PutOutcome, crate::ports::StoreError> {
        Err(crate::ports::StoreError::database("no controls in this fixture"))
    }

    async fn delete_control(&self, _: &str, _: u64) -> Result<crate::ports::DeleteOutcome, crate::ports::StoreError> {
        Ok(crate::ports::DeleteOutcome::Deleted(false))
    }

    async fn controls(&self) -> Result<(u64, Vec<crate::domain::controls::Control>), crate::ports::StoreError> {
        Ok((0, Vec::new()))
    }

    async fn control_revision(&self) -> Result<u64, crate::ports::StoreError> {
        Ok(0)
    }
}

#[async_trait::async_trait]
impl DayScans for NoEvents {
    async fn scan_day(
        &self,
        _: NaiveDate,
        _: &[String],
        _: &mut (dyn FnMut(crate::ports::DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn scan_days(
        &self,
        _: chrono::NaiveDate,
        _: chrono::NaiveDate,
        _: &[String],
        _: &mut (dyn FnMut(crate::ports::DailyRow) + Send),
    ) -> Result<u64, crate::ports::StoreError> {
        Ok(0)
    }

    async fn product_days(
        &self,
        _: i64,
        _: &[chrono::NaiveDate],
        _: &[String],
    ) -> Result<Vec<crate::ports::ProductDay>, crate::ports::StoreError> {
        Ok(Vec::new())
    }

    async fn over_caps(
        &self,
        _: i64,
        _: chrono::NaiveDate,
        caps: &[(String, u32)],
    ) -> Result<Vec<u64>, crate::ports::StoreError> {
        Ok(vec![0; caps.len()])
    }
}

#[async_trait::async_trait]
impl crate::ports::HourScans for NoEvents {
    async fn scan_hours(
        &self,
        _: NaiveDate,
        _: NaiveDate,
        _: Option<std::ops::Range<i64>>,
        _: &[String],
        _: &mut (dyn FnMut(crate::domain::trending::HourRow) + Send),
    ) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn product_hours(
        &self,
        _: i64,
        _: NaiveDate,
        _: NaiveDate,
        _: &[String],
    ) -> Result<Vec<crate::domain::trending::HourRow>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl CatalogRows for NoEvents {
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

    async fn catalog_entries(&self, _: &[i64]) -> Result<Vec<crate::ports::CatalogEntry>, crate::ports::StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl RunLog for NoEvents {
    async fn record_run(&self, _: &crate::ports::RankingRun) -> Result<(), crate::ports::StoreError> {
        Ok(())
    }

    async fn ranking_run(
        &self,
        _: chrono::NaiveDate,
        _: &str,
    ) -> Result<Option<crate::ports::RankingRun>, crate::ports::StoreError> {
        Ok(None)
    }

    async fn record_profile(&self, _: &str, _: &str) -> Result<(), StoreError> {
        Ok(())
    }

    async fn stored_profile(&self, _: &str) -> Result<Option<String>, StoreError> {
        Ok(None)
    }
}

#[async_trait::async_trait]
impl ChangeFeed for NoEvents {
    async fn advance_epoch(&self) -> Result<i64, StoreError> {
        Ok(1)
    }

    async fn scan_changes(
        &self,
        _: std::ops::Range<i64>,
        _: NaiveDate,
        _: NaiveDate,
        _: &[String],
        _: &mut (dyn FnMut(crate::ports::ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn scan_products(
        &self,
        _: &[i64],
        _: NaiveDate,
        _: NaiveDate,
        _: &[String],
        _: &mut (dyn FnMut(crate::ports::ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn catalog_changed(&self, _: std::ops::Range<i64>) -> Result<bool, StoreError> {
        Ok(false)
    }
}

/// A generous bound for a state to be reached: never an assertion about speed.
pub const EVENTUALLY: Duration = Duration::from_secs(120);

/// Polls `check` until it holds, for at most [`EVENTUALLY`]; panics naming `what` otherwise.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    eventually_some(what, async || check().await.then_some(())).await
}

/// Polls `check` until it gives a value, for at most [`EVENTUALLY`]; panics naming `what`
/// otherwise.
pub async fn eventually_some<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + EVENTUALLY;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not reached within {EVENTUALLY:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The ranking day `days_ago` days before today (UTC, the servers' default zone), as the wire
/// writes it.
pub fn day(days_ago: u64) -> String {
    (Utc::now().date_naive() - chrono::Days::new(days_ago)).to_string()
}

/// Noon (UTC) of the day `days_ago` days before today: an instant well inside its day.
pub fn noon(days_ago: u64) -> DateTime<Utc> {
    let noon = chrono::NaiveTime::from_hms_opt(12, 0, 0).unwrap_or_default();
    (Utc::now().date_naive() - chrono::Days::new(days_ago)).and_time(noon).and_utc()
}

/// A gRPC request for `path` on a raw HTTP/2 connection to `addr` (its message is sent
/// separately, or never).
pub fn grpc_request(addr: std::net::SocketAddr, path: &str) -> tonic::codegen::http::Request<()> {
    tonic::codegen::http::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap_or_default()
}

/// A feeder with no sink: the feed is off (its cursors an in-process store's, never read).
pub fn feeder_off(policy: Arc<Policy>, metrics: Arc<Metrics>) -> crate::app::feed::Feeder {
    let settings = crate::app::feed::FeedSettings {
        top: 0,
        interval: Duration::from_secs(1),
        whole_every: Duration::from_secs(3_600),
    };
    let cursors = Arc::new(MemoryRankingStore::new());
    crate::app::feed::Feeder::new(cursors, Vec::new(), policy, metrics, settings)
}

/// A store's promise about a version's statistics, checked on any store (the in-process one
/// in its unit tests, Redis in the integration tests): published with the version under its
/// fence, read back bit for bit by version (a superseded version keeps its own), and nothing
/// of a publication refused by the fence (a holder whose day lease another took).
pub async fn statistics_travel_with_their_versions<S>(store: &S, key: crate::ports::RankingKey)
where
    S: crate::ports::RankingStore + crate::ports::LeaseLock,
{
    use crate::domain::normalize::AxisStats;
    use crate::domain::ranking::PopulationStats;
    use crate::domain::snapshot::{Scored, Snapshot};
    use crate::ports::{Fence, Form, Publishing, RecencyClock, VersionLife, VersionStats, day_lease};

    let stats_of = |n: u32| VersionStats {
        stats: PopulationStats {
            axes: vec![AxisStats { mean: 0.1 * f64::from(n), std: 1.0 / f64::from(n + 2), count: n as usize }],
        },
        clock: RecencyClock { day_start_us: i64::from(n), reference_us: i64::from(n) * 1_000 },
        profile: format!("profile-{n}"),
        computed_at_us: i64::from(n) * 7,
    };
    let copy = |n: i64| Arc::new(Snapshot::from_ranked(vec![Scored { product_id: n, score: n as f64 }]).expect("one"));
    let life =
        VersionLife { expire_at: Utc::now() + chrono::Duration::days(1), superseded_for: Duration::from_secs(60) };
    let name = day_lease(key.date());
    let lease = store.try_acquire(&name, Duration::from_secs(30)).await.expect("lease store").expect("free");
    let fence = Fence::of(&lease);
    let first = store
        .publish_copy(
            key,
            Publishing { stats: Some(&stats_of(1)), ..Publishing::copy(&copy(1)) },
            life,
            Form::Full,
            &fence,
        )
        .await
        .expect("v1");
    let second = store
        .publish_copy(
            key,
            Publishing { stats: Some(&stats_of(2)), ..Publishing::copy(&copy(2)) },
            life,
            Form::Full,
            &fence,
        )
        .await
        .expect("v2");
    let plain = store.publish_copy(key, Publishing::copy(&copy(3)), life, Form::Full, &fence).await.expect("v3");
    assert_eq!(store.version_stats(key, first).await.expect("read"), Some(stats_of(1)), "a superseded version's own");
    assert_eq!(store.version_stats(key, second).await.expect("read"), Some(stats_of(2)));
    assert_eq!(store.version_stats(key, plain).await.expect("read"), None, "published without statistics");

    // Another holder takes the day: the old holder's publication writes nothing.
    store.release(&lease).await.expect("release");
    let other = store.try_acquire(&name, Duration::from_secs(30)).await.expect("lease store").expect("free");
    let refused = store
        .publish_copy(
            key,
            Publishing { stats: Some(&stats_of(4)), ..Publishing::copy(&copy(4)) },
            life,
            Form::Full,
            &fence,
        )
        .await;
    assert!(matches!(refused, Err(StoreError::LostLease { .. })), "{refused:?}");
    let newer = store
        .publish_copy(
            key,
            Publishing { stats: Some(&stats_of(5)), ..Publishing::copy(&copy(5)) },
            life,
            Form::Full,
            &Fence::of(&other),
        )
        .await
        .expect("v5");
    let current = store.versions(&[key]).await.expect("versions")[0];
    assert_eq!(current, Some(newer), "the refused publication moved nothing");
    assert_eq!(store.version_stats(key, newer).await.expect("read"), Some(stats_of(5)));
    store.release(&other).await.expect("release");
}
