//! Publication of a day's ranked populations, for a recompute and a live pass alike: the
//! daily ranking published (and installed in this replica's copies, and its statistics
//! recorded), the weekly ranking, and every segment's ranking of both, fanned out by the
//! catalog's memberships.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::NaiveDate;
use futures_util::{StreamExt, TryStreamExt};

use super::Computed;
use super::controls::{CurrentControls, served_at, served_now};
use super::faults::FaultPoints;
use super::keep::HistoryKeeper;
use crate::app::feed::Feeder;
use crate::app::policy::Policy;
use crate::app::snapshots::{Held, Snapshots};
use crate::domain::catalog::{Membership, Segment};
use crate::domain::snapshot::{Changes, MERGE_SHARE, Snapshot};
use crate::metrics::Metrics;
use crate::ports::{
    CatalogRows, FeedCause, Fence, Form, Publishing, RankingKey, RankingRun, RankingStore, RunLog, StoreError,
    VersionLife, VersionStats,
};

/// A ranked population as it is published: its copy in ranking order, built once (what gets
/// published, this replica's copy, and the index its segments are found in), with what
/// [`Computed`] says of it.
pub(super) struct RankedCopy {
    pub whole: Arc<Snapshot>,
    pub clamped: usize,
    pub stats: crate::domain::ranking::PopulationStats,
    pub clock: crate::domain::explain::RecencyClock,
}

impl RankedCopy {
    /// The copy of `computed`'s entries (in ascending product order), built from
    /// `previous`, the organic copy of the version before, when there is one and at most an
    /// eighth of the scores changed: only the changed entries are sorted, the others copied
    /// as runs (a live pass over a large day changes about one score in a hundred). Beyond
    /// that (the population's statistics moved most norms) sorting the whole is cheaper. The
    /// same copy either way.
    pub(super) fn of(computed: Computed, previous: Option<&Snapshot>) -> Result<Self, StoreError> {
        let Computed { entries, clamped, stats, clock } = computed;
        let changes = match previous {
            Some(previous) => Changes::between_at_most(previous, &entries, entries.len() / MERGE_SHARE)
                .map_err(StoreError::ranking)?
                .map(|changes| (previous, changes)),
            None => None,
        };
        let whole = match changes {
            Some((previous, changes)) => {
                drop(entries);
                previous.with_changes(&changes)
            }
            None => Snapshot::from_unordered(entries),
        };
        let whole = whole.map(Arc::new).map_err(StoreError::ranking)?;
        Ok(Self { whole, clamped, stats, clock })
    }
}

/// This replica's copy of a published segment ranking: its positions in the whole ranking's
/// organic copy, or a served board of its own when controls act on it.
/// Segment rankings being published at once by one recompute.
const SEGMENT_PUBLICATIONS: usize = 32;

/// Publishes ranked populations and installs their copies: the ranking store, this replica's
/// copies, the run log (what ExplainRank reproduces norms from) and the catalog (segments).
pub(super) struct Publisher {
    pub rankings: Arc<dyn RankingStore>,
    pub snapshots: Arc<Snapshots>,
    pub runs: Arc<dyn RunLog>,
    pub catalog: Arc<dyn CatalogRows>,
    pub policy: Arc<Policy>,
    pub metrics: Arc<Metrics>,
    /// The merchandising controls every published board is served with.
    pub controls: Arc<CurrentControls>,
    /// Where the boards of ended days are kept as their history.
    pub history: HistoryKeeper,
    /// The ranking feed, told of every version published.
    pub feeder: Arc<Feeder>,
    /// Where a test holds the work before it writes.
    pub faults: FaultPoints,
}

impl Publisher {
    /// How long the versions of `date`'s rankings live.
    pub(super) fn life(&self, date: NaiveDate) -> VersionLife {
        VersionLife { expire_at: self.policy.daily_expiry(date), superseded_for: self.policy.snapshot_ttl }
    }

    /// Publishes a whole (daily, weekly or trending) ranking from its organic copy, served
    /// under the controls active now, with `stats` (a daily or trending board's statistics),
    /// and installs the served copy: served by this replica before the call returns; the
    /// others load it on the announcement or their next poll. A live pass's publication
    /// (`live`) is in the form replicas load only (the daily ranking's sorted set waits for
    /// the next recompute).
    pub(super) async fn publish_whole(
        &self,
        key: RankingKey,
        (whole, clamped): (&Arc<Snapshot>, usize),
        stats: Option<&VersionStats>,
        life: VersionLife,
        live: bool,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let form = if live { Form::Loadable } else { Form::Full };
        let _own = self.snapshots.publishing(key);
        let served = served_now(&self.controls, &self.policy, key, whole).await?;
        self.faults.before_publish().await;
        let previous = self.snapshots.get(key);
        let previous = previous.as_ref().map(|held| (held.version, &held.ranking));
        let publishing = Publishing { copy: &served, previous, stats };
        let version = self.rankings.publish_copy(key, publishing, life, form, fence).await?;
        self.metrics.recompute.scores_clamped.inc_by(clamped as u64);
        self.history.keep(key, version, &served).await?;
        self.feeder.note(key, version, &served, if live { FeedCause::LivePass } else { FeedCause::Recompute });
        self.snapshots.install_copy(key, version, served).await;
        Ok(version)
    }

    /// Publishes a ranked daily or trending board (`run_name`: its run record's name) with
    /// its statistics, and records them in SQL too, where a replica of the release before
    /// this one reads them.
    pub(super) async fn publish_explained(
        &self,
        key: RankingKey,
        ranked: &RankedCopy,
        run_name: String,
        life: VersionLife,
        live: bool,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let stats = self.stats_of(ranked);
        let whole = (&ranked.whole, ranked.clamped);
        let version = self.publish_whole(key, whole, Some(&stats), life, live, fence).await?;
        self.record_as(key.date(), version, stats, run_name).await?;
        Ok(version)
    }

    /// The statistics of `ranked`, computed now with this profile.
    fn stats_of(&self, ranked: &RankedCopy) -> VersionStats {
        VersionStats {
            stats: ranked.stats.clone(),
            clock: ranked.clock,
            profile: self.policy.profile.fingerprint(),
            computed_at_us: self.policy.now().timestamp_micros(),
        }
    }

    /// Publishes `served`, a board served again from the organic board of `base`, the
    /// current version of `key` (a control pass's or a withdrawal's), with `base`'s
    /// statistics: it ranks the same organic scores, so it explains with the same norms. The
    /// changes are taken against `base` itself, held or read whole for the pass, so a replica
    /// that holds no copy of the board (one reading the store) writes only what changed too.
    /// `form`: a withdrawal's is [`Form::Full`] (hidden products leave the daily ranking's
    /// sorted set at once); a control pass's is [`Form::Loadable`], written as what changed
    /// where the layout allows.
    pub(super) async fn publish_derived(
        &self,
        key: RankingKey,
        base: &Held,
        served: &Arc<Snapshot>,
        (life, form): (VersionLife, Form),
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let stats = self.rankings.version_stats(key, base.version).await?;
        let previous = Some((base.version, &base.ranking));
        let publishing = Publishing { copy: served, previous, stats: stats.as_ref() };
        let version = self.rankings.publish_copy(key, publishing, life, form, fence).await?;
        self.record_derived(key, base.version, version).await?;
        Ok(version)
    }

    /// Records `stats`, version `version`'s, as the day's run `name` in SQL: what a replica
    /// of the release before this one explains from (this release reads a version's own).
    async fn record_as(
        &self,
        date: NaiveDate,
        version: u64,
        stats: VersionStats,
        name: String,
    ) -> Result<(), StoreError> {
        let VersionStats { stats, clock, profile, computed_at_us } = stats;
        let run = RankingRun { date, version, stats, clock, computed_at_us, profile, profile_name: name };
        self.runs.record_run(&run).await
    }

    /// Records in SQL that `version` of `key` (a control pass's or a withdrawal's, served
    /// from the organic board of `base`) explains with `base`'s statistics, for a replica of
    /// the release before this one. Only the boards ExplainRank reads whole (the daily and
    /// the trending board) have a record; a base whose record was already replaced by a newer
    /// publication leaves it as it is.
    async fn record_derived(&self, key: RankingKey, base: u64, version: u64) -> Result<(), StoreError> {
        let name = match key {
            RankingKey::Daily(_) => self.policy.stored_profile_name().to_string(),
            RankingKey::Trending(_) => self.policy.trending_run_name(),
            _ => return Ok(()),
        };
        match self.runs.ranking_run(key.date(), &name).await? {
            Some(run) if run.version == base => self.runs.record_run(&RankingRun { version, ..run }).await,
            _ => Ok(()),
        }
    }

    /// Publishes a live pass's rankings of `date`: the daily ranking, its record and
    /// segments, and the weekly ranking and its segments once `weekly` is ranked (on another
    /// thread meanwhile), fanned out by `catalog`. Returns the daily version.
    pub(super) async fn publish_computed(
        &self,
        date: NaiveDate,
        daily: RankedCopy,
        weekly: impl Future<Output = Result<RankedCopy, StoreError>>,
        catalog: &Membership,
        fence: &Fence,
    ) -> Result<u64, StoreError> {
        let life = self.life(date);
        let day = async {
            let key = RankingKey::Daily(date);
            let name = self.policy.stored_profile_name().to_string();
            let version = self.publish_explained(key, &daily, name, life, true, fence).await?;
            self.publish_segments(key, &daily.whole, catalog, life, fence, FeedCause::LivePass).await?;
            Ok::<_, StoreError>(version)
        };
        let week = async {
            let key = RankingKey::Weekly(date);
            let weekly = weekly.await?;
            self.publish_whole(key, (&weekly.whole, weekly.clamped), None, life, true, fence).await?;
            self.publish_segments(key, &weekly.whole, catalog, life, fence, FeedCause::LivePass).await
        };
        let (version, ()) = tokio::try_join!(day, week)?;
        Ok(version)
    }

    /// The catalog's segment memberships now.
    pub(super) async fn membership(&self) -> Result<Membership, StoreError> {
        let mut membership = Membership::with_limit(self.policy.max_segments);
        self.catalog.scan_catalog(&mut |e| membership.add(&e)).await?;
        self.metrics.recompute.segment_memberships_dropped.set(i64::try_from(membership.dropped()).unwrap_or(i64::MAX));
        if membership.dropped() > 0 {
            tracing::warn!(
                limit = self.policy.max_segments,
                dropped = membership.dropped(),
                "the catalog names more segments than RANKING_MAX_SEGMENTS; the rest get no ranking"
            );
        }
        Ok(membership)
    }

    /// Publishes one ranking per segment of `whole_key`: its members' entries of `whole`
    /// (that ranking's organic copy), in ranking order, with the whole ranking's scores, served
    /// under the controls acting on the segment's board now. A segment published before that
    /// has no member now gets an empty version, so it reads as empty rather than as its old
    /// members.
    pub(super) async fn publish_segments(
        &self,
        whole_key: RankingKey,
        whole: &Arc<Snapshot>,
        catalog: &Membership,
        life: VersionLife,
        fence: &Fence,
        cause: FeedCause,
    ) -> Result<(), StoreError> {
        let previous = self.rankings.published_segments(whole_key).await?;
        let mut lists: Vec<(Segment, Vec<u32>)> =
            catalog.segments().iter().copied().zip(catalog.positions_in(whole)).collect();
        lists.retain(|(segment, list)| !list.is_empty() || previous.contains(segment));
        let current: HashSet<Segment> = lists.iter().map(|(s, _)| *s).collect();
        lists.extend(previous.iter().filter(|s| !current.contains(s)).map(|s| (*s, Vec::new())));
        let published: Vec<Segment> = lists.iter().filter(|(_, l)| !l.is_empty()).map(|(s, _)| *s).collect();
        // Every segment of this publication, the emptied ones included, so that this replica's
        // copies of them are replaced too.
        self.snapshots.know_segments(whole_key, &lists.iter().map(|(s, _)| *s).collect::<Vec<_>>());
        let controls = self.controls.fresh().await?;
        let at = served_at(&self.policy, whole_key.date());
        // A few publications in flight at once, each its own script on its own keys. A
        // segment's copy is positions in its whole board, unless controls act on it: its
        // served board is then a copy of its own. Each goes through the one publication path,
        // so a segment that barely moved is written as what changed against the copy held.
        let mut publications = futures_util::stream::iter(lists.into_iter().filter_map(|(segment, positions)| {
            let key = whole_key.restricted(Some(segment))?;
            let controls = &controls;
            Some(async move {
                let own = self.snapshots.publishing(key);
                let organic = Snapshot::at_positions(whole, positions).map_err(StoreError::ranking)?;
                let copy = match controls.acting(key, at).is_empty() {
                    true => Arc::new(organic),
                    false => {
                        let organic = Arc::new(
                            Snapshot::from_ranked(organic.page(0, u64::MAX).into_owned())
                                .map_err(StoreError::ranking)?,
                        );
                        controls.served(key, &organic, at, self.policy.profile.layout())?
                    }
                };
                let held = self.snapshots.get(key);
                let previous = held.as_ref().map(|held| (held.version, &held.ranking));
                let publishing = Publishing { copy: &copy, previous, stats: None };
                let version = self.rankings.publish_copy(key, publishing, life, Form::Full, fence).await?;
                Ok::<_, StoreError>((key, version, copy, own))
            })
        }))
        .buffer_unordered(SEGMENT_PUBLICATIONS);
        let (mut copies, mut own) = (Vec::new(), Vec::new());
        while let Some((key, version, copy, publishing)) = publications.try_next().await? {
            copies.push((key, version, copy));
            own.push(publishing);
        }
        self.history.keep_all(&copies).await?;
        for (key, version, served) in &copies {
            self.feeder.note(*key, *version, served, cause);
        }
        // Installed together: one swap of this replica's copies rather than one per segment.
        self.snapshots.install_copies(copies).await;
        drop(own);
        self.rankings.record_segments(whole_key, &published, life.expire_at).await
    }
}
