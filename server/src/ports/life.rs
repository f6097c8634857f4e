//! How long a published version and the versions it supersedes are kept ([`VersionLife`]):
//! the retention arithmetic every ranking store applies.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How long a published version and the one it supersedes live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VersionLife {
    /// When the new version (the current one) expires.
    pub expire_at: DateTime<Utc>,
    /// How long the superseded version stays readable (page tokens); zero drops it at once.
    /// Of versions superseded in quick succession, only one per
    /// [`VersionLife::superseded_spacing`] is kept that long ([`VersionLife::superseded_life`]).
    pub superseded_for: Duration,
}

/// The longest a version superseded within [`VersionLife::superseded_spacing`] of another is
/// kept: a walk of pages under way when it was superseded goes on for seconds, not minutes.
pub const SUPERSEDED_GRACE: Duration = Duration::from_secs(30);

impl VersionLife {
    /// Superseded versions are kept for the whole `superseded_for` at most once per this
    /// long (a tenth of it): live passes publish a version every `RANKING_LIVE_INTERVAL`, and
    /// keeping each for `RANKING_SNAPSHOT_TTL` would hold 600 copies of a ranking at the
    /// defaults (24 GB at a million products).
    pub fn superseded_spacing(&self) -> Duration {
        self.superseded_for / 10
    }

    /// How long the others are kept: [`SUPERSEDED_GRACE`], or `superseded_for` when shorter.
    pub fn superseded_grace(&self) -> Duration {
        SUPERSEDED_GRACE.min(self.superseded_for)
    }

    /// How long the version this publication supersedes stays readable, given how long the
    /// longest-kept version superseded before it has left (`None`: no superseded version is
    /// kept): the whole `superseded_for`, unless a version kept for all of it was superseded
    /// less than [`VersionLife::superseded_spacing`] ago, then [`VersionLife::superseded_grace`].
    /// (A version kept for the grace only never has more left than that, so the longest-kept
    /// one tells.)
    pub fn superseded_life(&self, longest_left: Option<Duration>) -> Duration {
        match longest_left {
            Some(left) if left + self.superseded_spacing() > self.superseded_for => self.superseded_grace(),
            _ => self.superseded_for,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn life(secs: u64) -> VersionLife {
        VersionLife { expire_at: Utc::now(), superseded_for: Duration::from_secs(secs) }
    }

    #[test]
    fn one_superseded_version_per_tenth_of_the_ttl_is_kept_for_all_of_it() {
        let ttl = life(600);
        assert_eq!(ttl.superseded_life(None), Duration::from_secs(600), "nothing kept");
        // The last version kept whole was superseded 59 s ago, then 61 s ago.
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(541))), SUPERSEDED_GRACE);
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(539))), Duration::from_secs(600));
        // Only versions kept for the grace are left.
        assert_eq!(ttl.superseded_life(Some(Duration::from_secs(29))), Duration::from_secs(600));
        // A live pass every second for ten minutes: 10 versions kept whole, 30 for the grace.
        let mut kept: Vec<Duration> = Vec::new();
        let mut most = 0;
        for second in 0..1_200u64 {
            let now = Duration::from_secs(second);
            kept.retain(|until| *until > now);
            let left = kept.iter().max().map(|until| *until - now);
            kept.push(now + ttl.superseded_life(left));
            most = most.max(kept.len());
        }
        assert!((39..=41).contains(&most), "{most} superseded versions at most");
        // Short lives are kept whole, and zero keeps none.
        assert_eq!(life(20).superseded_life(Some(Duration::from_secs(19))), Duration::from_secs(20));
        assert_eq!(life(0).superseded_life(Some(Duration::ZERO)), Duration::ZERO);
    }
}
