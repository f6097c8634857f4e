//! Ranking days and hours in the configured IANA time zone.
//!
//! An event belongs to the day (and hour) of its `occurred_at` in `RANKING_TZ`. Day bounds
//! are computed through the zone's rules, so days around a DST change are 23 or 25 hours long.

use chrono::{DateTime, Days, NaiveDate, NaiveTime, Offset, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

/// One hour of one ranking day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RankingHour {
    /// The local date.
    pub date: NaiveDate,
    /// The local hour, 0–23.
    pub hour: u32,
}

/// The time zone that cuts time into ranking days.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankingCalendar {
    tz: Tz,
}

impl RankingCalendar {
    /// A calendar for the zone.
    pub fn new(tz: Tz) -> Self {
        Self { tz }
    }

    /// Days and hours of UTC.
    pub fn utc() -> Self {
        Self::new(chrono_tz::UTC)
    }

    /// The local date of an instant.
    pub fn day_of(&self, at: DateTime<Utc>) -> NaiveDate {
        at.with_timezone(&self.tz).date_naive()
    }

    /// The local date and hour of an instant.
    pub fn hour_of(&self, at: DateTime<Utc>) -> RankingHour {
        let local = at.with_timezone(&self.tz);
        RankingHour { date: local.date_naive(), hour: local.hour() }
    }

    /// The first instant of the local hour of `at_us` (Unix microseconds): an hour lasts an
    /// hour whatever the zone's offset (a zone half an hour off UTC starts its hours at :30),
    /// and the hour repeated when clocks go back is two hours, one per offset.
    pub fn hour_start_us(&self, at_us: i64) -> i64 {
        const HOUR_US: i64 = 3_600_000_000;
        let offset_us = DateTime::from_timestamp_micros(at_us)
            .map_or(0, |at| i64::from(at.with_timezone(&self.tz).offset().fix().local_minus_utc()) * 1_000_000);
        let local = at_us.saturating_add(offset_us);
        local - local.rem_euclid(HOUR_US) - offset_us
    }

    /// The first instant of a local day. Where midnight does not exist (a DST gap), the day
    /// starts at the first instant that does.
    pub fn day_start(&self, date: NaiveDate) -> DateTime<Utc> {
        self.local_start(date, 0)
    }

    /// The first instant of the following local day.
    pub fn day_end(&self, date: NaiveDate) -> DateTime<Utc> {
        self.day_start(date.checked_add_days(Days::new(1)).unwrap_or(date))
    }

    /// The first instant after the local hour.
    pub fn hour_end(&self, h: RankingHour) -> DateTime<Utc> {
        if h.hour >= 23 {
            self.day_end(h.date)
        } else {
            self.local_start(h.date, h.hour + 1).max(self.local_start(h.date, h.hour))
        }
    }

    fn local_start(&self, date: NaiveDate, hour: u32) -> DateTime<Utc> {
        let naive = date.and_time(NaiveTime::from_hms_opt(hour, 0, 0).unwrap_or(NaiveTime::MIN));
        // Try the wall-clock time, then step forward through a DST gap minute by minute
        // (gaps are at most a few hours).
        (0..=180)
            .find_map(|m| self.tz.from_local_datetime(&(naive + chrono::Duration::minutes(m))).earliest())
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_else(|| Utc.from_utc_datetime(&naive))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("valid instant")
    }

    #[test]
    fn day_boundary_follows_the_zone() {
        let seoul = RankingCalendar::new(chrono_tz::Asia::Seoul);
        // 23:59:59 and 00:00:00 local time in Seoul (UTC+9).
        assert_eq!(seoul.day_of(utc("2026-04-09T14:59:59Z")).to_string(), "2026-04-09");
        assert_eq!(seoul.day_of(utc("2026-04-09T15:00:00Z")).to_string(), "2026-04-10");
        let d = NaiveDate::from_ymd_opt(2026, 4, 10).expect("valid");
        assert_eq!(seoul.day_start(d), utc("2026-04-09T15:00:00Z"));
        assert_eq!(seoul.day_end(d), utc("2026-04-10T15:00:00Z"));
        let h = seoul.hour_of(utc("2026-04-09T15:30:00Z"));
        assert_eq!((h.date, h.hour), (d, 0));
        assert_eq!(seoul.hour_end(h), utc("2026-04-09T16:00:00Z"));
    }

    #[test]
    fn dst_days_have_their_real_length() {
        let ny = RankingCalendar::new(chrono_tz::America::New_York);
        let spring = NaiveDate::from_ymd_opt(2026, 3, 8).expect("valid");
        assert_eq!((ny.day_end(spring) - ny.day_start(spring)).num_hours(), 23);
        let autumn = NaiveDate::from_ymd_opt(2026, 11, 1).expect("valid");
        assert_eq!((ny.day_end(autumn) - ny.day_start(autumn)).num_hours(), 25);
    }

    #[test]
    fn an_hour_starts_at_the_local_hour() {
        let us = |s: &str| utc(s).timestamp_micros();
        let kolkata = RankingCalendar::new(chrono_tz::Asia::Kolkata);
        assert_eq!(kolkata.hour_start_us(us("2026-04-09T10:10:00Z")), us("2026-04-09T09:30:00Z"), "UTC+5:30");
        let seoul = RankingCalendar::new(chrono_tz::Asia::Seoul);
        assert_eq!(seoul.hour_start_us(us("2026-04-09T10:59:59.999999Z")), us("2026-04-09T10:00:00Z"));
        assert_eq!(seoul.hour_start_us(us("1969-12-31T23:30:00Z")), us("1969-12-31T23:00:00Z"), "before 1970");
        // New York's 01:00–02:00 happens twice on 2026-11-01: once at −4 h, once at −5 h.
        let ny = RankingCalendar::new(chrono_tz::America::New_York);
        let first = ny.hour_start_us(us("2026-11-01T05:20:00Z"));
        let second = ny.hour_start_us(us("2026-11-01T06:20:00Z"));
        assert_eq!((first, second), (us("2026-11-01T05:00:00Z"), us("2026-11-01T06:00:00Z")));
    }

    #[test]
    fn utc_hours() {
        let cal = RankingCalendar::new(chrono_tz::UTC);
        let h = cal.hour_of(utc("2026-04-09T23:10:00Z"));
        assert_eq!(h.hour, 23);
        assert_eq!(cal.hour_end(h), utc("2026-04-10T00:00:00Z"));
    }
}
