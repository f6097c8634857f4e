//! One lane per scoring profile: the service's own and each `RANKING_PROFILES` variant gets
//! its ranking store (a variant's keys under `P:profile:<name>` on Redis, an in-process store
//! of its own otherwise), feed cursors, snapshots, recompute, live and control passes, feeder,
//! queries, explanations, history and watches. They share SQL, the feed's sinks, the metrics,
//! the task tracker and the leases: the service profile's recompute and live passes read the
//! rows once and publish every profile's boards under its day lease, so the variants have no
//! scheduler or live passes of their own.

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::adapters::coalescing::CoalescingStore;
use crate::adapters::memory::MemoryRankingStore;
use crate::adapters::redis::RedisRankingStore;
use crate::app::explain::Explainer;
use crate::app::feed::Feeder;
use crate::app::history::History;
use crate::app::policy::Policy;
use crate::app::profiles::Lane;
use crate::app::queries::Queries;
use crate::app::recompute::{ControlPasses, LivePasses, Recompute, Stores, Withdrawals};
use crate::app::scheduler::Scheduler;
use crate::app::snapshots::Snapshots;
use crate::app::watch::WatchHub;
use crate::config::Settings;
use crate::metrics::Metrics;
use crate::ports::{FeedCursors, FeedSink, InForce, LeaseLock, MetricsStore, RankingStore};

/// What every lane shares.
pub(super) struct Shared<'a> {
    pub settings: &'a Settings,
    pub store: Arc<dyn MetricsStore>,
    pub metrics: Arc<Metrics>,
    pub tasks: TaskTracker,
    pub sinks: Vec<Arc<dyn FeedSink>>,
    /// The ranking store's layout in force, which the stores write.
    pub layout: InForce,
    /// How many profiles are served: `RANKING_SNAPSHOT_MAX_ENTRIES` is split evenly among
    /// their copies, so that it bounds the replica's memory whatever their number.
    pub profiles: usize,
}

/// A lane's background work, started by `run_until_stopped`.
pub(super) struct LaneTasks {
    /// The service profile's only: its recompute publishes every lane.
    pub scheduler: Option<Arc<Scheduler>>,
    /// The service profile's only: its passes publish every lane.
    pub live: Option<Arc<LivePasses>>,
    pub control_passes: Arc<ControlPasses>,
    pub feeder: Arc<Feeder>,
    pub snapshots: Arc<Snapshots>,
    pub watch: Arc<WatchHub>,
    pub withdrawals: Arc<Withdrawals>,
}

impl LaneTasks {
    /// Starts the lane's tasks on `tasks`, each ending at `stop`.
    pub fn spawn(&self, tasks: &TaskTracker, stop: &CancellationToken) {
        if let Some(scheduler) = &self.scheduler {
            tasks.spawn(scheduler.clone().run(stop.clone()));
        }
        if let Some(live) = &self.live {
            tasks.spawn(live.clone().run(stop.clone()));
        }
        tasks.spawn(self.control_passes.clone().run(stop.clone()));
        tasks.spawn(self.feeder.clone().run(stop.clone()));
        tasks.spawn(self.snapshots.clone().run(stop.clone()));
    }
}

/// A built lane: its services, its tasks, and its ranking store (the service profile's also
/// holds the hourly rankings ingestion writes).
pub(super) struct Built {
    pub lane: Lane,
    pub tasks: LaneTasks,
    pub rankings: Arc<dyn RankingStore>,
    /// The in-process store, when there is no Redis: the variants' stores share its leases.
    memory: Option<Arc<MemoryRankingStore>>,
}

/// The lane of `policy`'s profile; `own`, the service profile's lane, for a variant's.
pub(super) async fn build(shared: &Shared<'_>, policy: Arc<Policy>, own: Option<&Built>) -> anyhow::Result<Built> {
    let Shared { settings, store, metrics, tasks, sinks, profiles, layout } = shared;
    let profile = &policy.profile;
    store
        .record_profile(&profile.fingerprint(), &crate::domain::profile::text::to_toml(profile))
        .await
        .context("failed to record the scoring profile")?;
    tracing::info!(
        profile = %policy.profile_name,
        fingerprint = %profile.fingerprint(),
        custom_signals = profile.custom_names().len(),
        "scoring profile"
    );
    type Derived = (Arc<dyn RankingStore>, Arc<dyn LeaseLock>, Arc<dyn FeedCursors>);
    let mut memory = None;
    let (rankings, leases, cursors): Derived = match settings.redis.options() {
        Some(mut options) => {
            options.staging_ttl = policy.staging_ttl;
            options.layout = layout.clone();
            options.written = metrics.stores.written.clone();
            if own.is_some() {
                options.lease_prefix = Some(options.prefix.clone());
                options.prefix = format!("{}:profile:{}", options.prefix, policy.profile_name);
            }
            let redis = Arc::new(RedisRankingStore::connect(&options).context("invalid REDIS_URL")?);
            (Arc::new(CoalescingStore::new(redis.clone(), metrics.stores.top_fetches.clone())), redis.clone(), redis)
        }
        None => {
            let store = match own.and_then(|o| o.memory.as_ref()) {
                Some(own) => Arc::new(own.sharing_leases()),
                None => Arc::new(MemoryRankingStore::new()),
            };
            memory = Some(store.clone());
            (store.clone(), store.clone(), store)
        }
    };
    let feeder =
        Arc::new(Feeder::new(cursors, sinks.clone(), policy.clone(), metrics.clone(), settings.feed.followed()));
    let snapshots = Arc::new(Snapshots::new(
        rankings.clone(),
        policy.clone(),
        metrics.clone(),
        settings.ranking.snapshot_max_entries / (*profiles).max(1),
    ));
    let recompute = Arc::new(Recompute::new(
        Stores { sql: store.clone(), rankings: rankings.clone(), leases },
        snapshots.clone(),
        policy.clone(),
        metrics.clone(),
        tasks.clone(),
        feeder.clone(),
    ));
    let scheduler = own.is_none().then(|| Arc::new(Scheduler::new(recompute.clone())));
    let queries = Arc::new(Queries::new(rankings.clone(), snapshots.clone(), policy.clone(), recompute.clone()));
    let explainer = Arc::new(Explainer::new(
        (store.clone(), store.clone()),
        (rankings.clone(), store.clone()),
        store.clone(),
        queries.clone(),
        policy.clone(),
    ));
    let history = Arc::new(History::new(store.clone(), policy.clone()));
    let mut watch = WatchHub::new(
        queries.clone(),
        snapshots.clone(),
        metrics.clone(),
        settings.ranking.watch_interval,
        settings.ranking.max_watchers,
    );
    // One bound on a replica's WatchTopN streams, whichever profile they read.
    if let Some(own) = own {
        watch = watch.sharing_slots(own.tasks.watch.slots());
    }
    let watch = Arc::new(watch);
    let tasks = LaneTasks {
        scheduler,
        live: own.is_none().then(|| recompute.live_passes()),
        control_passes: recompute.control_passes(),
        feeder,
        snapshots,
        watch: watch.clone(),
        withdrawals: recompute.withdrawals(),
    };
    let lane = Lane { policy, queries, explainer, history, watch, recompute };
    Ok(Built { lane, tasks, rankings, memory })
}
