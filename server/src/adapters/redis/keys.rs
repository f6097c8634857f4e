//! Every key and channel name of the store, in one place (the table is in the module doc of
//! [`super`]), and the announcement messages published on the channel.
//!
//! A day's versioned rankings (daily, weekly, their segments) and the day's lease share one
//! hash tag, `{daily:D}`, so that a publication's script can check the writer's lease in the
//! slot it writes (fencing); each hourly ranking has a tag of its own (`{hour:…}`). A cluster
//! spreads days and hours over its shards, and every script touches one slot only.

use chrono::NaiveDate;

use crate::domain::catalog::Segment;
use crate::ports::{Announcement, RankingKey, StoreError, day_of_lease};

/// The names of one deployment's keys, all under its prefix.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    prefix: String,
    /// The leases' prefix (another store's, for a scoring profile's boards).
    lease_prefix: String,
}

impl Keys {
    /// Keys under `prefix`.
    pub fn new(prefix: impl Into<String>) -> Self {
        let prefix = prefix.into();
        Self { lease_prefix: prefix.clone(), prefix }
    }

    /// The same keys with the leases under `prefix` (the day's lease keeps the day's hash
    /// tag, so it stays in the slot of the rankings it guards).
    pub fn with_lease_prefix(mut self, prefix: String) -> Self {
        self.lease_prefix = prefix;
        self
    }

    /// The hash-tagged base of a ranking's keys: `P:{daily:2026-12-01}`,
    /// `P:{daily:2026-12-01}:weekly`, `P:{daily:2026-12-01}:dseg:brand:acme`,
    /// `P:{hour:2026-12-01T13}`.
    /// An hourly ranking's base is its ZSET.
    pub fn base(&self, key: RankingKey) -> String {
        let prefix = &self.prefix;
        match key {
            RankingKey::Daily(date) => format!("{prefix}:{{daily:{date}}}"),
            RankingKey::Weekly(date) => format!("{prefix}:{{daily:{date}}}:weekly"),
            RankingKey::DailySegment(date, s) => format!("{prefix}:{{daily:{date}}}:dseg:{s}"),
            RankingKey::WeeklySegment(date, s) => format!("{prefix}:{{daily:{date}}}:wseg:{s}"),
            RankingKey::Trending(date) => format!("{prefix}:{{daily:{date}}}:trending"),
            RankingKey::TrendingSegment(date, s) => format!("{prefix}:{{daily:{date}}}:tseg:{s}"),
            RankingKey::Hourly(h) => format!("{prefix}:{{hour:{}T{:02}}}", h.date, h.hour),
        }
    }

    /// The current version pointer of a versioned ranking.
    pub fn pointer(&self, key: RankingKey) -> String {
        format!("{}:version", self.base(key))
    }

    /// What a version number is appended to for the keys of that version (`…:v`); the
    /// scripts append `N:packed` and `N:index`.
    pub fn versions(&self, key: RankingKey) -> String {
        format!("{}:v", self.base(key))
    }

    /// The index of superseded versions still kept.
    pub fn superseded(&self, key: RankingKey) -> String {
        format!("{}:superseded", self.base(key))
    }

    /// The feed's cursor of a ranking (a hash), in its day's slot.
    pub fn feed_cursor(&self, key: RankingKey) -> String {
        format!("{}:feed", self.base(key))
    }

    /// The set of segments published with a whole ranking.
    pub fn segments(&self, whole: RankingKey) -> String {
        format!("{}:segments", self.base(whole))
    }

    /// A fresh staging key of a ranking (its packed copy and index add `:packed`, `:index`).
    pub fn staging(&self, key: RankingKey) -> String {
        format!("{}:staging:{:016x}", self.base(key), rand::random::<u64>())
    }

    /// A lease. A day's lease is tagged by its day, in the slot of the rankings it guards.
    pub fn lock(&self, name: &str) -> String {
        match day_of_lease(name) {
            Some(date) => format!("{}:{{daily:{date}}}:lock", self.lease_prefix),
            None => format!("{}:lock:{name}", self.lease_prefix),
        }
    }

    /// Whether two keys of this store hash to the same cluster slot: the same hash tag.
    pub fn same_slot(&self, a: &str, b: &str) -> bool {
        fn tag(key: &str) -> &str {
            key.split_once('{').and_then(|(_, rest)| rest.split_once('}')).map_or(key, |(tag, _)| tag)
        }
        tag(a) == tag(b)
    }

    /// The pub/sub channel of announcements.
    pub fn channel(&self) -> String {
        format!("{}:versions", self.prefix)
    }
}

/// The announcement of a ranking before its version number (`daily 2026-12-01`,
/// `dseg 2026-12-01 brand:acme`); `None` for the hourly rankings, which have no versions.
pub(super) fn announced(key: RankingKey) -> Option<String> {
    match key {
        RankingKey::Daily(date) => Some(format!("daily {date}")),
        RankingKey::Weekly(date) => Some(format!("weekly {date}")),
        RankingKey::DailySegment(date, s) => Some(format!("dseg {date} {s}")),
        RankingKey::WeeklySegment(date, s) => Some(format!("wseg {date} {s}")),
        RankingKey::Trending(date) => Some(format!("trending {date}")),
        RankingKey::TrendingSegment(date, s) => Some(format!("tseg {date} {s}")),
        RankingKey::Hourly(_) => None,
    }
}

/// The announcement a message carries, `None` for a message that is not one.
pub(super) fn parse_announcement(text: &str) -> Option<Announcement> {
    let parts: Vec<&str> = text.split(' ').collect();
    let date = parts.get(1)?.parse::<NaiveDate>().ok()?;
    let segment = |i: usize| parts.get(i).and_then(|s| Segment::parse(s).ok());
    let (key, version) = match (parts[0], parts.len()) {
        ("daily", 3) => (RankingKey::Daily(date), parts[2]),
        ("weekly", 3) => (RankingKey::Weekly(date), parts[2]),
        ("dseg", 4) => (RankingKey::DailySegment(date, segment(2)?), parts[3]),
        ("wseg", 4) => (RankingKey::WeeklySegment(date, segment(2)?), parts[3]),
        ("trending", 3) => (RankingKey::Trending(date), parts[2]),
        ("tseg", 4) => (RankingKey::TrendingSegment(date, segment(2)?), parts[3]),
        _ => return None,
    };
    Some(Announcement { key, version: version.parse().ok()? })
}

/// The sorted-set member of a product: zero-padded to 19 digits, so that Redis's byte order
/// of equal scores is the numeric order ("999" before "1000").
pub fn member(product_id: i64) -> String {
    format!("{product_id:019}")
}

/// The product of a sorted-set member.
pub(super) fn product_of(member: &str) -> Result<i64, StoreError> {
    member.parse().map_err(|_| StoreError::Corrupt(format!("ranking member {member:?} is not a product id")))
}

/// A version pointer's value: `N`, version N stored in layout 1, or `N:L…`, stored in layout
/// L by the release that writes it (refused unless this release reads L; see
/// `scripts/pointer.lua`).
pub(super) fn parse_version(v: Option<String>) -> Result<Option<u64>, StoreError> {
    let Some(v) = v else { return Ok(None) };
    let corrupt = || StoreError::Corrupt(format!("ranking version {v:?} is not a number"));
    let mut parts = v.splitn(3, ':');
    let version = parts.next().and_then(|n| n.parse().ok()).ok_or_else(corrupt)?;
    let layout = match parts.next() {
        None => 1,
        Some(layout) => layout.parse().map_err(|_| corrupt())?,
    };
    if !crate::ports::READS.contains(&layout) {
        return Err(StoreError::Layout { found: layout });
    }
    Ok(Some(version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::calendar::RankingHour;

    #[test]
    fn every_versioned_ranking_is_announced_and_heard_back() {
        let date: NaiveDate = "2026-12-01".parse().expect("date");
        let segment = Segment::parse("brand:acme").expect("segment");
        let keys = [
            RankingKey::Daily(date),
            RankingKey::Weekly(date),
            RankingKey::DailySegment(date, segment),
            RankingKey::WeeklySegment(date, segment),
            RankingKey::Trending(date),
            RankingKey::TrendingSegment(date, segment),
        ];
        for key in keys {
            let text = format!("{} 1796000000123", announced(key).expect("announced"));
            assert_eq!(parse_announcement(&text), Some(Announcement { key, version: 1_796_000_000_123 }), "{text}");
        }
        assert_eq!(announced(RankingKey::Hourly(RankingHour { date, hour: 3 })), None);
    }

    #[test]
    fn a_pointer_names_its_version_and_a_layout_this_release_reads_or_is_refused() {
        assert_eq!(parse_version(None).expect("read"), None);
        assert_eq!(parse_version(Some("1796000000123".into())).expect("read"), Some(1_796_000_000_123));
        assert_eq!(parse_version(Some("1796000000123:1".into())).expect("read"), Some(1_796_000_000_123));
        let delta = parse_version(Some("1796000000123:2:1796000000001".into())).expect("a delta version");
        assert_eq!(delta, Some(1_796_000_000_123));
        // Layout 3: a delta of a board with pins.
        let pinned = parse_version(Some("1796000000123:3:1796000000001".into())).expect("a delta with pins");
        assert_eq!(pinned, Some(1_796_000_000_123));
        let newer = parse_version(Some("1796000000123:4:1796000000001".into())).expect_err("refused");
        assert!(matches!(newer, StoreError::Layout { found: 4 }), "{newer}");
        for garbage in ["", "x", "12:x", ":2"] {
            assert!(matches!(parse_version(Some(garbage.into())), Err(StoreError::Corrupt(_))), "{garbage:?}");
        }
        for garbage in ["", "daily", "daily 2026-12-01", "daily x 1", "dseg 2026-12-01 1", "hour 2026-12-01 1"] {
            assert_eq!(parse_announcement(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn a_days_rankings_and_its_lease_share_its_hash_tag_and_days_differ() {
        let keys = Keys::new("p");
        let date: NaiveDate = "2026-12-01".parse().expect("date");
        let segment = Segment::parse("brand:acme").expect("segment");
        let tag = |k: &str| k[k.find('{').expect("open")..=k.find('}').expect("close")].to_string();
        let mut all = vec![keys.lock(&crate::ports::day_lease(date))];
        for ranking in [
            RankingKey::Daily(date),
            RankingKey::Weekly(date),
            RankingKey::DailySegment(date, segment),
            RankingKey::WeeklySegment(date, segment),
            RankingKey::Trending(date),
            RankingKey::TrendingSegment(date, segment),
        ] {
            all.extend([
                keys.base(ranking),
                keys.pointer(ranking),
                keys.versions(ranking),
                keys.superseded(ranking),
                keys.segments(ranking),
                keys.staging(ranking),
            ]);
        }
        assert!(all.iter().all(|k| tag(k) == "{daily:2026-12-01}"), "{all:?}");
        assert!(all.iter().all(|k| keys.same_slot(k, &all[0])));
        let daily = RankingKey::Daily(date);
        let next = RankingKey::Daily(date.succ_opt().expect("next day"));
        assert!(!keys.same_slot(&keys.pointer(next), &keys.pointer(daily)));
        let hour = RankingKey::Hourly(crate::domain::calendar::RankingHour { date, hour: 3 });
        assert!(!keys.same_slot(&keys.base(hour), &keys.pointer(daily)));
        assert_eq!(keys.lock("prune"), "p:lock:prune", "other leases keep their names");
        let bases: std::collections::HashSet<&String> = all.iter().collect();
        assert_eq!(bases.len(), all.len(), "no two rankings share a key");
        assert_eq!(
            (keys.versions(daily), keys.base(daily)),
            ("p:{daily:2026-12-01}:v".into(), "p:{daily:2026-12-01}".into())
        );
        assert_eq!((member(999) < member(1000), product_of(&member(42)).ok()), (true, Some(42)));
    }
}
