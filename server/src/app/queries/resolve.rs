//! Which ranking a read means: a selector resolved under the policy at an instant, a page
//! token's continuation checked against the request, and the previous period of a ranking.

use chrono::{DateTime, Utc};

use super::Queries;
use super::types::{Resolved, Selector, TopQuery};
use crate::app::invalid::Invalid;
use crate::app::page_token::PageToken;
use crate::domain::calendar::RankingHour;
use crate::ports::RankingKey;

impl Queries {
    /// Decides the ranking a selector means at `now`.
    pub fn resolve(&self, selector: Selector, now: DateTime<Utc>) -> Result<Resolved, Invalid> {
        let current = self.policy.calendar.hour_of(now);
        let date = selector.date.unwrap_or(current.date);
        if let Some(hour) = selector.hour
            && hour > 23
        {
            return Err(Invalid::field("hour", format!("must be 0-23, got {hour}")));
        }
        let window = selector.window.unwrap_or_default();
        let key = match RankingKey::of(window, date, None) {
            Some(key) => key,
            None => {
                let hour = match selector.hour {
                    Some(h) => h,
                    None if date == current.date => current.hour,
                    None => {
                        return Err(Invalid::field(
                            "hour",
                            "required for WINDOW_HOURLY when a date other than today is given",
                        ));
                    }
                };
                RankingKey::Hourly(RankingHour { date, hour })
            }
        };
        let key = key.restricted(selector.segment).ok_or_else(|| {
            Invalid::field("segment", "segments have daily, weekly and trending rankings, not WINDOW_HOURLY")
        })?;
        Ok(Resolved { key, window })
    }

    /// The ranking and first entry a page token continues from, after checking that the
    /// request's own selector (where given) names the same ranking.
    pub(super) fn continued(&self, query: &TopQuery, token: &str) -> Result<(Resolved, PageToken), Invalid> {
        let token = PageToken::decode(token)?;
        if query.offset != 0 {
            return Err(Invalid::field("offset", "must be 0 with page_token (the token holds the position)"));
        }
        let s = query.selector;
        let window = token.key.window();
        let hour = match token.key {
            RankingKey::Hourly(h) => Some(h.hour),
            _ => None,
        };
        let differs = s.window.is_some_and(|w| w != window)
            || s.segment.is_some_and(|seg| Some(seg) != token.key.segment())
            || s.date.is_some_and(|d| d != token.key.date())
            || s.hour.is_some_and(|h| Some(h) != hour);
        if differs {
            return Err(Invalid::field("page_token", "was issued for another ranking than the one requested"));
        }
        Ok((Resolved { key: token.key, window }, token))
    }
}

/// The same window one period earlier: the day before (for the weekly window, the 7 days
/// ending the day before; for trending, the day before's last board), or the hour before.
pub(super) fn previous_period(key: RankingKey) -> Option<RankingKey> {
    match key {
        RankingKey::Daily(d) => d.pred_opt().map(RankingKey::Daily),
        RankingKey::Weekly(d) => d.pred_opt().map(RankingKey::Weekly),
        RankingKey::DailySegment(d, s) => d.pred_opt().map(|d| RankingKey::DailySegment(d, s)),
        RankingKey::WeeklySegment(d, s) => d.pred_opt().map(|d| RankingKey::WeeklySegment(d, s)),
        RankingKey::Trending(d) => d.pred_opt().map(RankingKey::Trending),
        RankingKey::TrendingSegment(d, s) => d.pred_opt().map(|d| RankingKey::TrendingSegment(d, s)),
        RankingKey::Hourly(h) if h.hour > 0 => Some(RankingKey::Hourly(RankingHour { date: h.date, hour: h.hour - 1 })),
        RankingKey::Hourly(h) => h.date.pred_opt().map(|date| RankingKey::Hourly(RankingHour { date, hour: 23 })),
    }
}
