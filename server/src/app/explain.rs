//! ExplainRank: why a product holds its place in a daily ranking or on today's trending
//! board. The one read that touches SQL: the product's own rows (a handful of primary-key
//! lookups), never a scan of the day. The population statistics (and a trending board's
//! instant) are the served version's own, published with it in the ranking store; a version
//! published by the release before this one has them in SQL's record of the day's last
//! publication instead.

use std::sync::Arc;

use chrono::{Days, NaiveDate};

use super::policy::Policy;
use super::queries::{EntryControls, Queries, QueryError, RankAnswer, RankQuery, RankedEntry, Selector, Window};
use crate::domain::controls::Control;
use crate::domain::explain::{Explanation, explain};
use crate::domain::profile::{ScoringProfile, SignalRef};
use crate::domain::trending::{HourPoints, explain_trending};
use crate::domain::vocabulary::Retracted;
use crate::ports::{
    ControlRows, DayScans, HourScans, RankingKey, RankingRun, RankingStore, RunLog, Segment, StoreError, VersionStats,
};

/// Attempts to find the served version and its recorded statistics in agreement. They
/// disagree only while a recompute publishes (between its publication and its record, or
/// before this replica loaded the new version): each retry waits one snapshot poll.
const ATTEMPTS: u32 = 4;

/// What to explain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExplainQuery {
    /// The product.
    pub product_id: i64,
    /// The ranking day (`None` = today).
    pub date: Option<NaiveDate>,
    /// Explain the product's place in this segment's ranking (same score, own rank).
    pub segment: Option<Segment>,
    /// The board: the daily ranking (`None` or [`Window::Daily`]) or the trending board; the
    /// others' scores are not explained.
    pub window: Option<Window>,
}

/// What a trending score adds to its explanation: the board's instant and its hours.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendingFigures {
    /// T, Unix microseconds.
    pub at_us: i64,
    /// The hours of the window, oldest first.
    pub hours: Vec<HourPoints>,
}

/// A product's daily score taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainAnswer {
    /// The product's served entry.
    pub entry: RankedEntry,
    /// The merchandising controls acting on it and the entry above, by id.
    pub controls: EntryControls,
    /// The controls acting on the product, as stored.
    pub acting: Vec<Control>,
    /// The ranking day.
    pub date: NaiveDate,
    /// The version explained.
    pub version: u64,
    /// The numbers, from SQL and the version's statistics.
    pub explanation: Explanation,
    /// The entry ranked directly above (none for rank 1).
    pub above: Option<RankedEntry>,
    /// `above.main_floor + 1 - main` (0 for rank 1): the main-score points the product needs
    /// to pass the entry above on the most significant dimension.
    pub points_to_overtake: f64,
    /// The counts in SQL moved on since the version was computed (events arrived since):
    /// the numbers are today's and the next recompute will serve them.
    pub stale: bool,
    /// What retractions took from the day's counts.
    pub retracted: Retracted,
    /// Per signal capped per actor by the version's profile: the signal, its cap, and the
    /// day's events the cap kept from counting.
    pub capped: Vec<CapFigures>,
    /// A trending score's instant and hours (its explanation has no terms of its own).
    pub trending: Option<TrendingFigures>,
}

/// What a per-actor cap did to one signal of the day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapFigures {
    /// The signal.
    pub signal: SignalRef,
    /// At most this many events per actor counted.
    pub per_actor: u32,
    /// The events over the cap (the signal's value is what counted).
    pub over_cap: u64,
}

/// The explain service.
pub struct Explainer {
    /// One product's rows by key.
    scans: Arc<dyn DayScans>,
    /// One product's hours by key.
    hours: Arc<dyn HourScans>,
    /// What a version's norms were computed from, and the profile it was ranked by: published
    /// with the version, or recorded in SQL by the release before this one.
    rankings: Arc<dyn RankingStore>,
    runs: Arc<dyn RunLog>,
    /// The stored controls, for those acting on the product.
    controls: Arc<dyn ControlRows>,
    queries: Arc<Queries>,
    policy: Arc<Policy>,
}

impl Explainer {
    /// Explains from SQL (`scans`, `runs`, `controls`) what `queries` serve.
    pub fn new(
        (scans, hours): (Arc<dyn DayScans>, Arc<dyn HourScans>),
        (rankings, runs): (Arc<dyn RankingStore>, Arc<dyn RunLog>),
        controls: Arc<dyn ControlRows>,
        queries: Arc<Queries>,
        policy: Arc<Policy>,
    ) -> Self {
        Self { scans, hours, rankings, runs, controls, queries, policy }
    }

    /// The statistics of `version` of `key`: its own, or SQL's record of the day's last
    /// publication when that is the version (one published by the release before this one).
    async fn stats_of(&self, key: RankingKey, version: u64, run_name: &str) -> Result<Option<RankingRun>, StoreError> {
        if let Some(own) = self.rankings.version_stats(key, version).await? {
            let VersionStats { stats, clock, profile, computed_at_us } = own;
            let (date, profile_name) = (key.date(), run_name.to_string());
            return Ok(Some(RankingRun { date, version, stats, clock, computed_at_us, profile, profile_name }));
        }
        Ok(self.runs.ranking_run(key.date(), run_name).await?.filter(|run| run.version == version))
    }

    /// Explains one product's entry in the daily ranking of the query's day.
    pub async fn explain(&self, query: ExplainQuery) -> Result<ExplainAnswer, QueryError> {
        let window = match query.window.unwrap_or_default() {
            window @ (Window::Daily | Window::Trending) => window,
            Window::Hourly | Window::Weekly => {
                let reason = "must be WINDOW_DAILY (or unset) or WINDOW_TRENDING: the scores explained";
                return Err(crate::app::invalid::Invalid::field("window", reason).into());
            }
        };
        let trending = window == Window::Trending;
        let date = query.date.unwrap_or_else(|| self.policy.today(self.policy.now()));
        let selector = Selector { window: Some(window), date: Some(date), hour: None, segment: query.segment };
        let run_name =
            if trending { self.policy.trending_run_name() } else { self.policy.stored_profile_name().into() };
        let mut attempt = 1;
        loop {
            let served = self.queries.rank(RankQuery { selector, product_id: query.product_id, neighbors: 1 }).await?;
            // The statistics belong to the whole daily ranking; a segment's ranking is published
            // with it, under a version of its own.
            let version = match query.segment {
                None => served.version,
                Some(_) => {
                    let whole = Selector { segment: None, ..selector };
                    self.queries
                        .rank(RankQuery { selector: whole, product_id: query.product_id, neighbors: 0 })
                        .await?
                        .version
                }
            }
            .unwrap_or_default();
            let board = RankingKey::of(window, date, None).expect("a versioned window");
            let run = self.stats_of(board, version, &run_name).await?;
            match run {
                Some(run) if trending => {
                    let profile = self.profile_of(&run.profile).await?;
                    let first = self.policy.trending_first_day(date);
                    let rows = self.hours.product_hours(query.product_id, first, date, profile.custom_names()).await?;
                    let t_us = run.clock.reference_us;
                    let half_life = self.policy.trending_half_life_us();
                    let e = explain_trending(&profile, query.product_id, &rows, &run.stats, t_us, half_life);
                    let explanation = Explanation {
                        profile,
                        metrics: Default::default(),
                        terms: Vec::new(),
                        unscored: Vec::new(),
                        carry_points: 0.0,
                        main: e.main,
                        axes: e.axes,
                        breakdown: e.breakdown,
                        score: e.score,
                    };
                    let trending = TrendingFigures { at_us: t_us, hours: e.hours };
                    let figures = (Default::default(), Vec::new());
                    return self.answer(served, (date, version), explanation, figures, Some(trending)).await;
                }
                Some(run) => {
                    let first = self.policy.carry_start(date);
                    let days: Vec<NaiveDate> = (0..=(date - first).num_days().max(0) as u64)
                        .filter_map(|n| first.checked_add_days(Days::new(n)))
                        .collect();
                    let profile = self.profile_of(&run.profile).await?;
                    let history = self.scans.product_days(query.product_id, &days, profile.custom_names()).await?;
                    let capped = self.capped(&profile, query.product_id, date).await?;
                    let explanation =
                        explain(profile, query.product_id, (first, date), &history, &run.stats, run.clock);
                    let retracted = history.iter().find(|d| d.date == date).map(|d| d.retracted).unwrap_or_default();
                    return self.answer(served, (date, version), explanation, (retracted, capped), None).await;
                }
                _ if attempt < ATTEMPTS => {
                    attempt += 1;
                    tokio::time::sleep(self.policy.snapshot_poll).await;
                }
                _ => return Err(QueryError::Unexplained { date, version }),
            }
        }
    }

    /// The answer of `explanation`, an explanation of `served` (the entry as `version` of
    /// `date`'s board serves it): the entry above, the controls acting, whether SQL moved on.
    async fn answer(
        &self,
        served: RankAnswer,
        (date, version): (NaiveDate, u64),
        explanation: Explanation,
        (retracted, capped): (Retracted, Vec<CapFigures>),
        trending: Option<TrendingFigures>,
    ) -> Result<ExplainAnswer, QueryError> {
        let above = served.above.last().copied();
        let ids = served.controls.of(served.entry.product_id);
        let acting = if ids.is_empty() {
            Vec::new()
        } else {
            let (_, stored) = self.controls.controls().await?;
            stored.into_iter().filter(|c| ids.contains(&c.id)).collect()
        };
        // Computed organically: compared with the organic score, not the boosted one.
        let organic = served.controls.organic_score(served.entry.product_id).unwrap_or(served.entry.score);
        let points_to_overtake =
            above.and_then(|a| a.breakdown).map_or(0.0, |b| b.main_floor as f64 + 1.0 - explanation.main);
        Ok(ExplainAnswer {
            stale: explanation.score.to_bits() != organic.to_bits(),
            entry: served.entry,
            controls: served.controls,
            acting,
            date,
            version,
            explanation,
            above,
            points_to_overtake,
            retracted,
            capped,
            trending,
        })
    }

    /// What the profile's per-actor caps kept from counting for the product that day.
    async fn capped(
        &self,
        profile: &ScoringProfile,
        product_id: i64,
        date: NaiveDate,
    ) -> Result<Vec<CapFigures>, StoreError> {
        let caps: Vec<(SignalRef, u32)> =
            profile.signals().filter_map(|s| profile.cap(s).per_actor.map(|n| (s, n))).collect();
        if caps.is_empty() {
            return Ok(Vec::new());
        }
        let named: Vec<(String, u32)> = caps.iter().map(|(s, n)| (profile.signal_name(*s).to_string(), *n)).collect();
        let over = self.scans.over_caps(product_id, date, &named).await?;
        Ok(caps
            .into_iter()
            .zip(over)
            .map(|((signal, per_actor), over_cap)| CapFigures { signal, per_actor, over_cap })
            .collect())
    }

    /// The profile a version was computed with, by the fingerprint its run recorded: the
    /// current one, or one recorded in SQL before the profile changed. A run recorded
    /// before fingerprints were (`""`) was computed with the built-in profile, the only one
    /// then, which the current policy holds unless a profile file replaced it.
    async fn profile_of(&self, fingerprint: &str) -> Result<Arc<ScoringProfile>, StoreError> {
        let current = &self.policy.profile;
        if fingerprint.is_empty() || fingerprint == current.fingerprint() {
            return Ok(Arc::clone(current));
        }
        let text = self.runs.stored_profile(fingerprint).await?;
        match text.map(|t| crate::domain::profile::text::parse(&t)) {
            Some(Ok(profile)) => Ok(Arc::new(profile)),
            other => {
                let problem = match other {
                    Some(Err(e)) => e,
                    _ => "not recorded".into(),
                };
                Err(StoreError::Corrupt(format!("the scoring profile {fingerprint} of the version: {problem}")))
            }
        }
    }
}
