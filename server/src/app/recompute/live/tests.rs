//! Live passes over a metrics store kept in memory with its change epochs (the SQL store's
//! contract, written out), on the in-process ranking store: midnight, late rows of the day
//! before, and what each pass publishes against a recompute of the same rows.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{Days, NaiveDate};

use super::*;
use crate::adapters::memory::MemoryRankingStore;
use crate::app::policy::{Policy, PolicySettings};
use crate::app::recompute::Recompute;
use crate::app::snapshots::Snapshots;
use crate::domain::live::ProductRow;
use crate::domain::vocabulary::DailyMetrics;
use crate::metrics::Metrics;
use crate::ports::{
    CatalogEntry, CatalogRows, ChangeFeed, ChangedRow, DailyRow, DayScans, EventLedger, LeaseLock, ProductDay,
    RankingKey, RankingRun, RankingStore, RunLog, Scored,
};
use tokio_util::sync::CancellationToken;

/// Rows by (day, product): views, latest event, the epoch of their last write.
type Rows = BTreeMap<(NaiveDate, i64), (i64, i64, i64)>;

#[derive(Default)]
struct EpochRows {
    rows: Mutex<Rows>,
    epoch: Mutex<i64>,
}

impl EpochRows {
    /// A write of the row (`views` replacing the old value), stamped with the current epoch.
    fn put(&self, date: NaiveDate, product_id: i64, views: i64) {
        let epoch = *self.epoch.lock().expect("epoch");
        let last = date.and_hms_opt(10, 0, 0).expect("time").and_utc().timestamp_micros() + product_id;
        self.rows.lock().expect("rows").insert((date, product_id), (views, last, epoch));
    }

    fn row(product_id: i64, views: i64, last: i64) -> DailyRow {
        DailyRow { product_id, metrics: DailyMetrics::counts(views, 0, 0, 0), last_event_us: last }
    }

    fn changed(date: NaiveDate, product_id: i64, views: i64, last: i64) -> ChangedRow {
        let metrics = DailyMetrics::counts(views, 0, 0, 0);
        ChangedRow { row: ProductRow { date, product_id, metrics, last_event_us: last }, updated_us: 0 }
    }

    fn visit(
        &self,
        keep: impl Fn(NaiveDate, i64, i64) -> bool,
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        let rows = self.rows.lock().expect("rows").clone();
        let mut n = 0;
        for ((date, product_id), (views, last, epoch)) in rows {
            if keep(date, product_id, epoch) {
                visit(Self::changed(date, product_id, views, last));
                n += 1;
            }
        }
        Ok(n)
    }
}

#[async_trait::async_trait]
impl EventLedger for EpochRows {
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

    async fn prune(&self, _: chrono::DateTime<chrono::Utc>, _: NaiveDate, _: u32) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// No hourly rows: these tests follow the daily boards.
#[async_trait::async_trait]
impl crate::ports::HourScans for EpochRows {
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
impl DayScans for EpochRows {
    async fn scan_day(
        &self,
        date: NaiveDate,
        _: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        self.scan_days(date, date, &[], visit).await
    }

    async fn scan_days(
        &self,
        first: NaiveDate,
        last: NaiveDate,
        _: &[String],
        visit: &mut (dyn FnMut(DailyRow) + Send),
    ) -> Result<u64, StoreError> {
        let mut sums: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for ((date, product), (views, at, _)) in self.rows.lock().expect("rows").iter() {
            if *date >= first && *date <= last {
                let sum = sums.entry(*product).or_insert((0, i64::MIN));
                *sum = (sum.0 + views, sum.1.max(*at));
            }
        }
        for (product, (views, at)) in &sums {
            visit(Self::row(*product, *views, *at));
        }
        Ok(sums.len() as u64)
    }

    async fn product_days(&self, _: i64, _: &[NaiveDate], _: &[String]) -> Result<Vec<ProductDay>, StoreError> {
        Ok(Vec::new())
    }

    async fn over_caps(&self, _: i64, _: NaiveDate, caps: &[(String, u32)]) -> Result<Vec<u64>, StoreError> {
        Ok(vec![0; caps.len()])
    }
}

/// No controls, as in the fixture without events.
#[async_trait::async_trait]
impl crate::ports::ControlRows for EpochRows {
    async fn put_control(
        &self,
        control: crate::domain::controls::Control,
        expected: u64,
        at: i64,
    ) -> Result<crate::ports::PutOutcome, StoreError> {
        crate::test_support::NoEvents.put_control(control, expected, at).await
    }

    async fn delete_control(&self, id: &str, expected: u64) -> Result<crate::ports::DeleteOutcome, StoreError> {
        crate::test_support::NoEvents.delete_control(id, expected).await
    }

    async fn controls(&self) -> Result<(u64, Vec<crate::domain::controls::Control>), StoreError> {
        crate::test_support::NoEvents.controls().await
    }

    async fn control_revision(&self) -> Result<u64, StoreError> {
        crate::test_support::NoEvents.control_revision().await
    }
}

#[async_trait::async_trait]
impl crate::ports::HistoryRows for EpochRows {
    async fn keep_day(
        &self,
        board: crate::domain::board::Board<'_>,
        date: NaiveDate,
        version: u64,
        top: &[u8],
        at: i64,
    ) -> Result<crate::ports::Kept, StoreError> {
        crate::test_support::NoEvents.keep_day(board, date, version, top, at).await
    }

    async fn kept_days(
        &self,
        board: crate::domain::board::Board<'_>,
    ) -> Result<Vec<crate::domain::history::KeptDay>, StoreError> {
        crate::test_support::NoEvents.kept_days(board).await
    }

    async fn prune_history(&self, before: NaiveDate) -> Result<u64, StoreError> {
        crate::test_support::NoEvents.prune_history(before).await
    }
}

#[async_trait::async_trait]
impl CatalogRows for EpochRows {
    async fn update_catalog(&self, _: &[CatalogEntry]) -> Result<(), StoreError> {
        Ok(())
    }

    async fn hidden_among(&self, _: &[i64]) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }

    async fn hidden_products(&self) -> Result<Vec<i64>, StoreError> {
        Ok(Vec::new())
    }

    async fn scan_catalog(&self, _: &mut (dyn FnMut(CatalogEntry) + Send)) -> Result<u64, StoreError> {
        Ok(0)
    }

    async fn catalog_entries(&self, _: &[i64]) -> Result<Vec<CatalogEntry>, StoreError> {
        Ok(Vec::new())
    }
}

#[async_trait::async_trait]
impl RunLog for EpochRows {
    async fn record_run(&self, _: &RankingRun) -> Result<(), StoreError> {
        Ok(())
    }

    async fn ranking_run(&self, _: NaiveDate, _: &str) -> Result<Option<RankingRun>, StoreError> {
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
impl ChangeFeed for EpochRows {
    async fn advance_epoch(&self) -> Result<i64, StoreError> {
        let mut epoch = self.epoch.lock().expect("epoch");
        *epoch += 1;
        Ok(*epoch)
    }

    async fn scan_changes(
        &self,
        epochs: std::ops::Range<i64>,
        first: NaiveDate,
        last: NaiveDate,
        _: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        self.visit(|d, _, e| epochs.contains(&e) && d >= first && d <= last, visit)
    }

    async fn scan_products(
        &self,
        products: &[i64],
        first: NaiveDate,
        last: NaiveDate,
        _: &[String],
        visit: &mut (dyn FnMut(ChangedRow) + Send),
    ) -> Result<u64, StoreError> {
        self.visit(|d, p, _| products.contains(&p) && d >= first && d <= last, visit)
    }

    async fn catalog_changed(&self, _: std::ops::Range<i64>) -> Result<bool, StoreError> {
        Ok(false)
    }
}

struct Fixture {
    rows: Arc<EpochRows>,
    ranking: Arc<MemoryRankingStore>,
    recompute: Arc<Recompute>,
}

fn fixture() -> Fixture {
    fixture_with(Duration::ZERO)
}

/// The fixture with live passes every `live_interval`.
fn fixture_with(live_interval: Duration) -> Fixture {
    let rows = Arc::new(EpochRows::default());
    let ranking = Arc::new(MemoryRankingStore::new());
    let settings = PolicySettings { recompute_interval: Duration::ZERO, ..PolicySettings::default() };
    let policy = Arc::new(Policy::new(settings).with_live_interval(live_interval));
    let metrics = Arc::new(Metrics::new());
    let snapshots = Arc::new(Snapshots::new(ranking.clone(), policy.clone(), metrics.clone(), 10_000));
    let stores =
        crate::app::recompute::Stores { sql: rows.clone(), rankings: ranking.clone(), leases: ranking.clone() };
    let recompute = Arc::new(Recompute::new(
        stores,
        snapshots,
        policy.clone(),
        metrics.clone(),
        tokio_util::task::TaskTracker::new(),
        Arc::new(crate::test_support::feeder_off(policy, metrics)),
    ));
    Fixture { rows, ranking, recompute }
}

/// The current daily and weekly rankings of `date`: versions and entries.
async fn published(ranking: &MemoryRankingStore, date: NaiveDate) -> Vec<(Option<u64>, Vec<Scored>)> {
    let mut out = Vec::new();
    for key in [RankingKey::Daily(date), RankingKey::Weekly(date)] {
        let page = ranking.top(key, 0, 1_000).await.expect("top");
        out.push((page.version, page.entries));
    }
    out
}

/// Asserts the current live rankings of `date` are what a recompute of the same rows
/// publishes (which it then has done).
async fn equal_to_a_recompute(f: &Fixture, date: NaiveDate) {
    let live = published(&f.ranking, date).await;
    f.recompute.run(date).await.expect("recompute");
    let recomputed = published(&f.ranking, date).await;
    for (l, r) in live.iter().zip(&recomputed) {
        assert!(r.0 > l.0, "a newer version: {:?} then {:?}", l.0, r.0);
        assert_eq!(l.1, r.1, "live entries are the recompute's");
    }
}

/// Without an interval the live passes' task ends at once: nothing but a recompute moves
/// the rankings. With one, it runs until it is stopped.
#[tokio::test(start_paused = true)]
async fn without_an_interval_no_live_pass_runs() {
    let stop = tokio_util::sync::CancellationToken::new();
    let off = fixture().recompute.live_passes().run(stop.clone());
    tokio::time::timeout(Duration::from_secs(3_600), off).await.expect("ended without being stopped");

    let on = tokio::spawn(fixture_with(Duration::from_secs(1)).recompute.live_passes().run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(!on.is_finished(), "live passes run until stopped");
    stop.cancel();
    on.await.expect("stopped");
}

#[tokio::test]
async fn at_midnight_the_holder_lets_the_old_day_go_and_late_rows_of_it_reach_the_new_day() {
    let f = fixture();
    // Yesterday and today: versions of days past retention expire at once.
    let next = chrono::Utc::now().date_naive();
    let day = next.checked_sub_days(Days::new(1)).expect("date");
    let before = day.pred_opt().expect("date");
    // Views of 30+ carry over (main ≥ 1 at 0.1 a view … 3 and more).
    f.rows.put(before, 1, 40);
    f.rows.put(day, 1, 5);
    f.rows.put(day, 2, 60);
    let mut holder = None;
    f.recompute.live_passes().live_turn(day, &mut holder, &CancellationToken::new()).await;
    assert_eq!(holder.as_ref().map(|h| h.date), Some(day));
    assert!(holder.as_ref().is_some_and(|h| h.held.is_some()), "read whole and published");
    equal_to_a_recompute(&f, day).await;

    // Today changes; a pass publishes it.
    f.rows.put(day, 3, 90);
    f.recompute.live_passes().live_turn(day, &mut holder, &CancellationToken::new()).await;
    equal_to_a_recompute(&f, day).await;

    // Midnight, with a row of the old day arriving late (it carries into the new day) and
    // the new day's first rows: the old day's live lease is given back, the new day read whole.
    f.rows.put(day, 4, 300);
    f.rows.put(next, 2, 3);
    f.recompute.live_passes().live_turn(next, &mut holder, &CancellationToken::new()).await;
    assert_eq!(holder.as_ref().map(|h| h.date), Some(next));
    let ttl = Duration::from_secs(30);
    let freed = f.ranking.try_acquire(&format!("live:{day}"), ttl).await.expect("lease store");
    assert!(freed.is_some(), "the old day's live lease was given back");
    let daily = f.ranking.top(RankingKey::Daily(next), 0, 10).await.expect("top");
    assert!(daily.entries.iter().any(|e| e.product_id == 4), "the late row of the old day carries over");
    equal_to_a_recompute(&f, next).await;

    // Later still, another late row of the old day: the pass reads that product's days again.
    f.rows.put(day, 1, 500);
    f.recompute.live_passes().live_turn(next, &mut holder, &CancellationToken::new()).await;
    equal_to_a_recompute(&f, next).await;
}

/// A replica stopping in the middle of a pass gives the day's lease back: another replica
/// publishes the day at once, not after the lease's life.
#[tokio::test]
async fn a_pass_cut_short_by_a_stop_gives_the_days_lease_back() {
    let f = fixture();
    let day = chrono::Utc::now().date_naive();
    f.rows.put(day, 1, 5);
    let (reached, _release) = f.recompute.faults().hold_before_publish();
    let stop = CancellationToken::new();
    let passes = f.recompute.live_passes();
    let turn = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut holder = None;
            passes.live_turn(day, &mut holder, &stop).await;
            holder.map(|h| h.held.is_some())
        })
    };
    reached.await.expect("the pass reached its publication");
    let ttl = Duration::from_secs(30);
    assert!(f.ranking.try_acquire(&day_lease(day), ttl).await.expect("lease store").is_none(), "held by the pass");
    stop.cancel();
    assert_eq!(turn.await.expect("the turn ended"), Some(false), "the population is read whole next time");
    let taken = f.ranking.try_acquire(&day_lease(day), ttl).await.expect("lease store");
    assert!(taken.is_some(), "the day's lease was given back at the stop");
}
