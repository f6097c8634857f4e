//! The vocabulary of the rankings a store keeps: [`RankingKey`], which board of which day (or
//! hour), segment included.

use chrono::NaiveDate;

use crate::domain::board::Window;
use crate::domain::calendar::RankingHour;
use crate::domain::catalog::Segment;

/// Which ranking to read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankingKey {
    /// The exact daily ranking.
    Daily(NaiveDate),
    /// The exact rolling weekly ranking of the 7 days ending with the date.
    Weekly(NaiveDate),
    /// The daily ranking restricted to a segment's members (same scores, own ranks).
    DailySegment(NaiveDate, Segment),
    /// The weekly ranking restricted to a segment's members.
    WeeklySegment(NaiveDate, Segment),
    /// The exact trending board of the day: hours of counts decayed by a half-life, as of
    /// each version's instant.
    Trending(NaiveDate),
    /// The trending board restricted to a segment's members.
    TrendingSegment(NaiveDate, Segment),
    /// The approximate hourly ranking.
    Hourly(RankingHour),
}

impl RankingKey {
    /// Whether the ranking is exact and replaced whole by a recompute, so that it has
    /// versions (and replicas may serve it from a snapshot); hourly rankings change with
    /// every event and have none.
    pub fn is_versioned(&self) -> bool {
        !matches!(self, Self::Hourly(_))
    }

    /// The ranking a segment ranking restricts (itself for the others).
    pub fn whole(&self) -> RankingKey {
        match self {
            Self::DailySegment(d, _) => Self::Daily(*d),
            Self::WeeklySegment(d, _) => Self::Weekly(*d),
            Self::TrendingSegment(d, _) => Self::Trending(*d),
            other => *other,
        }
    }

    /// The segment, for a segment ranking.
    pub fn segment(&self) -> Option<Segment> {
        match self {
            Self::DailySegment(_, s) | Self::WeeklySegment(_, s) | Self::TrendingSegment(_, s) => Some(*s),
            _ => None,
        }
    }

    /// This ranking restricted to `segment` (`None`: unchanged); `None` when the window has
    /// no segment rankings (hourly).
    pub fn restricted(self, segment: Option<Segment>) -> Option<RankingKey> {
        match (self.whole(), segment) {
            (whole, None) => Some(whole),
            (Self::Daily(d), Some(s)) => Some(Self::DailySegment(d, s)),
            (Self::Weekly(d), Some(s)) => Some(Self::WeeklySegment(d, s)),
            (Self::Trending(d), Some(s)) => Some(Self::TrendingSegment(d, s)),
            _ => None,
        }
    }

    /// Its window.
    pub fn window(&self) -> Window {
        match self {
            Self::Daily(_) | Self::DailySegment(..) => Window::Daily,
            Self::Weekly(_) | Self::WeeklySegment(..) => Window::Weekly,
            Self::Trending(_) | Self::TrendingSegment(..) => Window::Trending,
            Self::Hourly(_) => Window::Hourly,
        }
    }

    /// The ranking of a versioned window on `date`, of `segment` or the whole one; `None` for
    /// the hourly window, whose rankings are named by their hour.
    pub fn of(window: Window, date: NaiveDate, segment: Option<Segment>) -> Option<RankingKey> {
        let whole = match window {
            Window::Daily => Self::Daily(date),
            Window::Weekly => Self::Weekly(date),
            Window::Trending => Self::Trending(date),
            Window::Hourly => return None,
        };
        whole.restricted(segment)
    }

    /// The ranking day.
    pub fn date(&self) -> NaiveDate {
        match self {
            Self::Daily(d)
            | Self::Weekly(d)
            | Self::Trending(d)
            | Self::DailySegment(d, _)
            | Self::WeeklySegment(d, _)
            | Self::TrendingSegment(d, _) => *d,
            Self::Hourly(h) => h.date,
        }
    }
}
