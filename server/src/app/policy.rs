//! The one policy every component reads: the ranking calendar, the scoring profile, the
//! windows of days (accept, retention, carry-over) and every time constant of the
//! application (recompute wait and lease, scheduler markers, staging and hourly expiry).
//!
//! Built once from the settings; components receive an `Arc<Policy>` and never keep copies
//! of its numbers, so a rule such as "the oldest retained day" is computed in one place.

use std::time::Duration;

use chrono::{DateTime, Days, NaiveDate, Utc};

use crate::domain::calendar::{RankingCalendar, RankingHour};
use std::sync::Arc;

use crate::domain::profile::ScoringProfile;

/// Rows deleted per statement by retention.
pub const PRUNE_CHUNK: u32 = 5_000;

/// Where the reads' "now" comes from: the system clock, or (in tests) tokio's clock from a
/// chosen instant, so that a paused clock can be moved across midnight.
#[derive(Debug, Clone, Copy, Default)]
pub enum Clock {
    /// `Utc::now()`.
    #[default]
    System,
    /// `at` plus the tokio time elapsed since `since`.
    Tokio {
        /// The instant the clock showed at `since`.
        at: DateTime<Utc>,
        /// The tokio instant it was set.
        since: tokio::time::Instant,
    },
}

impl Clock {
    /// A clock showing `at` now and following tokio's time from here.
    pub fn tokio_from(at: DateTime<Utc>) -> Self {
        Self::Tokio { at, since: tokio::time::Instant::now() }
    }

    /// The current instant.
    pub fn now(&self) -> DateTime<Utc> {
        match self {
            Self::System => Utc::now(),
            Self::Tokio { at, since } => {
                *at + chrono::Duration::from_std(since.elapsed()).unwrap_or(chrono::TimeDelta::MAX)
            }
        }
    }
}

/// The application's rules and time constants.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Cuts time into ranking days and hours (`RANKING_TZ`).
    pub calendar: RankingCalendar,
    /// Oldest accepted event age in days.
    pub accept_days: u32,
    /// Days events, daily metrics and daily rankings are kept (> `accept_days`).
    pub retention_days: u32,
    /// Period of the scheduler; zero runs only the start-up recompute.
    pub recompute_interval: Duration,
    /// Shortest time between two live passes of today (`RANKING_LIVE_INTERVAL`); zero: none.
    pub live_interval: Duration,
    /// How long an hour's points take to halve on the trending board
    /// (`RANKING_TRENDING_HALF_LIFE`).
    pub trending_half_life: Duration,
    /// Longest a Recompute call (or a scheduled one) waits for another replica's recompute
    /// of the same day to finish.
    pub recompute_wait: Duration,
    /// Longest life of a day's lease and of the live lease (`RANKING_RECOMPUTE_LEASE`); the
    /// life they are taken for is [`Policy::lease_life`].
    pub recompute_lease: Duration,
    /// `RANKING_SQL_TX_TIMEOUT`: what a frozen replica may hold the others for, its leases
    /// included ([`Policy::lease_life`]).
    pub sql_tx_timeout: Duration,
    /// Poll period while waiting for another replica's lease.
    pub lease_poll: Duration,
    /// Life of a staging key, so a crashed writer's half-written ranking goes away.
    pub staging_ttl: Duration,
    /// Hourly rankings expire this long after their hour ends.
    pub hourly_ttl: chrono::Duration,
    /// How long a superseded version of an exact ranking stays readable (page tokens);
    /// `RANKING_SNAPSHOT_TTL`.
    pub snapshot_ttl: Duration,
    /// Period of each replica's poll of the current versions, the fallback for a lost
    /// announcement (promised within 1 s; half of it leaves room for the load).
    pub snapshot_poll: Duration,
    /// Period of each replica's poll of the merchandising controls' revision and schedules:
    /// a change, a start or an end serves today's boards again within it and a publication
    /// (promised within 1 s).
    pub control_poll: Duration,
    /// Where "now" comes from for reads, snapshots and watches.
    pub clock: Clock,
    /// Most distinct segments a recompute publishes rankings for (`RANKING_MAX_SEGMENTS`).
    pub max_segments: usize,
    /// The scoring profile: signals, main score, carry-over and tie-break axes;
    /// its fingerprint is recorded with every version.
    pub profile: Arc<ScoringProfile>,
    /// Entries of a whole board kept per ended day (`RANKING_HISTORY_TOP`); a segment's board
    /// keeps at most [`SEGMENT_HISTORY_TOP`].
    pub history_top: usize,
    /// Days of rank history kept (`RANKING_HISTORY_DAYS`).
    pub history_days: u32,
    /// The name the boards scored by `profile` are read, fed and kept under:
    /// [`DEFAULT_PROFILE`] for the service's own, a `RANKING_PROFILES` name for a variant.
    pub profile_name: Arc<str>,
}

/// The name of the service's scoring profile (`RANKING_PROFILE`, or the built-in one): what a
/// read naming no profile reads, and what every answer and fed record says.
pub const DEFAULT_PROFILE: &str = "default";

/// Entries of a segment's board kept per ended day, at most.
pub const SEGMENT_HISTORY_TOP: usize = 100;

/// What a deployment sets of a [`Policy`]; the rest are the service's fixed constants or
/// set with the `with_*` methods.
#[derive(Debug, Clone)]
pub struct PolicySettings {
    /// The ranking time zone's calendar (`RANKING_TZ`).
    pub calendar: RankingCalendar,
    /// `RANKING_ACCEPT_DAYS`.
    pub accept_days: u32,
    /// `RANKING_RETENTION_DAYS`.
    pub retention_days: u32,
    /// `RANKING_RECOMPUTE_INTERVAL` (zero: no scheduler).
    pub recompute_interval: Duration,
    /// The scoring profile, built and checked once by whoever read it.
    pub profile: Arc<ScoringProfile>,
}

impl Default for PolicySettings {
    /// The service's defaults: UTC, 7 accept days, 8 retention days, a recompute every 5
    /// minutes, the built-in profile.
    fn default() -> Self {
        Self {
            calendar: RankingCalendar::new(chrono_tz::UTC),
            accept_days: 7,
            retention_days: 8,
            recompute_interval: Duration::from_secs(300),
            profile: Arc::new(ScoringProfile::built_in()),
        }
    }
}

impl Policy {
    /// A policy of `settings` and the fixed time constants of the service.
    pub fn new(settings: PolicySettings) -> Self {
        let PolicySettings { calendar, accept_days, retention_days, recompute_interval, profile } = settings;
        Self {
            calendar,
            accept_days,
            retention_days,
            recompute_interval,
            live_interval: Duration::ZERO,
            trending_half_life: Duration::from_secs(6 * 3_600),
            recompute_wait: Duration::from_secs(30),
            recompute_lease: Duration::from_secs(30),
            sql_tx_timeout: Duration::from_secs(5),
            lease_poll: Duration::from_millis(50),
            staging_ttl: Duration::from_secs(3_600),
            hourly_ttl: chrono::Duration::hours(2),
            snapshot_ttl: Duration::from_secs(600),
            snapshot_poll: Duration::from_millis(500),
            control_poll: Duration::from_millis(250),
            clock: Clock::System,
            max_segments: 10_000,
            profile,
            history_top: 1_000,
            history_days: 400,
            profile_name: DEFAULT_PROFILE.into(),
        }
    }

    /// The same policy keeping the top `top` of each whole board per ended day, for `days`.
    pub fn with_history(mut self, top: usize, days: u32) -> Self {
        self.history_top = top;
        self.history_days = days;
        self
    }

    /// The first day of rank history kept on `today`.
    pub fn oldest_history_day(&self, today: NaiveDate) -> NaiveDate {
        today.checked_sub_days(chrono::Days::new(u64::from(self.history_days))).unwrap_or(today)
    }

    /// The same policy with live passes every `interval` (zero: none).
    pub fn with_live_interval(mut self, interval: Duration) -> Self {
        self.live_interval = interval;
        self
    }

    /// The same policy halving an hour's trending points every `half_life`.
    pub fn with_trending_half_life(mut self, half_life: Duration) -> Self {
        self.trending_half_life = half_life;
        self
    }

    /// The first day of hourly rows the trending board of `date` reads: seven days of hours
    /// reach into the eighth day before in any zone.
    pub fn trending_first_day(&self, date: NaiveDate) -> NaiveDate {
        date.checked_sub_days(chrono::Days::new(8)).unwrap_or(date)
    }

    /// The name the runs of this profile's trending boards are recorded under: the profile's
    /// name after `trending:` (a profile's name has no `:`).
    pub fn trending_run_name(&self) -> String {
        format!("{}:{}", crate::domain::board::Window::Trending.name(), self.profile_name)
    }

    /// The trending half-life in microseconds (at least one).
    pub fn trending_half_life_us(&self) -> i64 {
        i64::try_from(self.trending_half_life.as_micros()).unwrap_or(i64::MAX).max(1)
    }

    /// The same policy scoring with `profile`.
    pub fn with_profile(mut self, profile: Arc<ScoringProfile>) -> Self {
        self.profile = profile;
        self
    }

    /// The same policy scoring a variant's boards: `profile`, under `name`.
    pub fn for_variant(mut self, name: &str, profile: Arc<ScoringProfile>) -> Self {
        self.profile = profile;
        self.profile_name = name.into();
        self
    }

    /// The profile's name as SQL keeps it with its boards' rows: empty for the service's
    /// own, whose rows were kept before variants existed.
    pub fn stored_profile_name(&self) -> &str {
        if self.is_default_profile() { "" } else { &self.profile_name }
    }

    /// Whether the boards are the service's own profile's.
    pub fn is_default_profile(&self) -> bool {
        &*self.profile_name == DEFAULT_PROFILE
    }

    /// The same policy publishing at most `max` segments' rankings per recompute.
    pub fn with_max_segments(mut self, max: usize) -> Self {
        self.max_segments = max;
        self
    }

    /// The same policy with `RANKING_RECOMPUTE_LEASE` set (at least 3 ms, so that a third
    /// of it is a renewal period).
    pub fn with_recompute_lease(mut self, lease: Duration) -> Self {
        self.recompute_lease = lease.max(Duration::from_millis(3));
        self
    }

    /// The same policy with `RANKING_SQL_TX_TIMEOUT` set, which bounds the leases' life too.
    pub fn with_sql_tx_timeout(mut self, timeout: Duration) -> Self {
        self.sql_tx_timeout = timeout;
        self
    }

    /// The life a day's lease and the live lease are taken and renewed for: the shorter of
    /// `RANKING_RECOMPUTE_LEASE` and `RANKING_SQL_TX_TIMEOUT` (at least 3 ms, so that a third
    /// of it is a renewal period). Its holder renews it every third of that while it works,
    /// so a long recompute keeps it; a holder that froze (a VM pause, SIGSTOP) loses it after
    /// at most this long, and the others publish again within one more live interval: no
    /// frozen replica stops the day's rankings for longer than its SQL session could.
    pub fn lease_life(&self) -> Duration {
        self.recompute_lease.min(self.sql_tx_timeout).max(Duration::from_millis(3))
    }

    /// The same policy reading the time from `clock`.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The current instant by the policy's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The same policy with `RANKING_SNAPSHOT_TTL` set.
    pub fn with_snapshot_ttl(mut self, ttl: Duration) -> Self {
        self.snapshot_ttl = ttl;
        self
    }

    /// Today in the ranking time zone.
    pub fn today(&self, now: DateTime<Utc>) -> NaiveDate {
        self.calendar.day_of(now)
    }

    /// The oldest day whose data is still kept on `today`.
    pub fn oldest_retained_day(&self, today: NaiveDate) -> NaiveDate {
        today.checked_sub_days(Days::new(u64::from(self.retention_days))).unwrap_or(today)
    }

    /// Events that occurred before this instant are pruned.
    pub fn events_pruned_before(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now - chrono::Duration::days(i64::from(self.retention_days))
    }

    /// When the daily ranking of `date` expires.
    pub fn daily_expiry(&self, date: NaiveDate) -> DateTime<Utc> {
        self.calendar.day_end(date) + chrono::Duration::days(i64::from(self.retention_days))
    }

    /// When the hourly ranking of `hour` expires.
    pub fn hourly_expiry(&self, hour: RankingHour) -> DateTime<Utc> {
        self.calendar.hour_end(hour) + self.hourly_ttl
    }

    /// The first day of the rolling week that ends with `date` (D-6).
    pub fn week_start(&self, date: NaiveDate) -> NaiveDate {
        date.checked_sub_days(Days::new(6)).unwrap_or(date)
    }

    /// The first day whose metrics the carry-over of `date` reads.
    pub fn carry_start(&self, date: NaiveDate) -> NaiveDate {
        date.checked_sub_days(Days::new(u64::from(self.profile.carry_days()))).unwrap_or(date)
    }

    /// Length of one scheduler slot: the periodic work of a slot is claimed by one replica.
    /// The interval, or 100 ms when the periodic loop is off (ticks are then driven by hand).
    pub fn scheduler_slot(&self) -> Duration {
        self.recompute_interval.max(Duration::from_millis(100))
    }

    /// How long a slot's claim is kept. Claims are named by their slot, so a long life
    /// cannot block a later slot; it must outlast any tick of its own slot (a tick may take
    /// longer than a short slot, and ticks driven by hand may repeat an instant).
    pub fn scheduler_claim_ttl(&self) -> Duration {
        (self.scheduler_slot() * 2).max(Duration::from_secs(60))
    }

    /// Whether `date` may be recomputed on `today`: not in the future, not older than
    /// retention. The error says why, for the caller.
    pub fn check_recomputable(&self, date: NaiveDate, today: NaiveDate) -> Result<(), String> {
        if date > today {
            return Err(format!("{date} is in the future"));
        }
        if date < self.oldest_retained_day(today) {
            return Err(format!("{date} is older than the {}-day retention", self.retention_days));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new(PolicySettings::default())
    }

    fn day(s: &str) -> NaiveDate {
        s.parse().expect("valid date")
    }

    #[test]
    fn recompute_window_is_today_back_to_retention() {
        let p = policy();
        let today = day("2026-04-09");
        assert!(p.check_recomputable(today, today).is_ok());
        assert!(p.check_recomputable(day("2026-04-01"), today).is_ok());
        assert!(p.check_recomputable(day("2026-03-31"), today).expect_err("too old").contains("8-day retention"));
        assert!(p.check_recomputable(day("2026-04-10"), today).expect_err("future").contains("future"));
    }

    #[test]
    fn expiries_follow_the_calendar() {
        let p = policy();
        assert_eq!(p.daily_expiry(day("2026-04-09")).to_rfc3339(), "2026-04-18T00:00:00+00:00");
        let h = RankingHour { date: day("2026-04-09"), hour: 23 };
        assert_eq!(p.hourly_expiry(h).to_rfc3339(), "2026-04-10T02:00:00+00:00");
        assert_eq!(p.carry_start(day("2026-04-09")), day("2026-04-02"));
        assert_eq!(p.scheduler_slot(), Duration::from_secs(300));
        let off = Policy { recompute_interval: Duration::ZERO, ..p.clone() };
        assert_eq!(off.scheduler_slot(), Duration::from_millis(100));
        assert_eq!(
            (p.scheduler_claim_ttl(), off.scheduler_claim_ttl()),
            (Duration::from_secs(600), Duration::from_secs(60))
        );
    }
}
