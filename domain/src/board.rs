//! Which board: the window of a ranking ([`Window`]: daily, hourly, weekly, trending), a set
//! of windows ([`Windows`], what a merchandising control acts on) and one board ([`Board`]:
//! window, segment and scoring profile; its days are named beside it). Every layer names a
//! board with these; the API's enum, the stored codes and the Redis vocabulary are each
//! converted in one place.

use crate::catalog::Segment;

/// The window of a ranking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Window {
    /// The exact ranking of one day, with carry-over (also what an unspecified window means).
    #[default]
    Daily,
    /// The approximate ranking of one hour, kept as events arrive.
    Hourly,
    /// The exact rolling ranking of the 7 days ending with the date, no carry-over.
    Weekly,
    /// The exact trending board: hours of counts decayed by a half-life, as of each
    /// version's instant.
    Trending,
}

impl Window {
    /// Every window, in the API's order.
    pub const ALL: [Window; 4] = [Window::Daily, Window::Hourly, Window::Weekly, Window::Trending];

    /// Its name in metric labels, run and feed names, logs and the command line.
    pub fn name(self) -> &'static str {
        match self {
            Window::Daily => "daily",
            Window::Hourly => "hourly",
            Window::Weekly => "weekly",
            Window::Trending => "trending",
        }
    }

    /// Whether its rankings are exact and replaced whole by each publication, so that they
    /// have versions, controls, segments, history and a feed (every window but hourly).
    pub fn is_versioned(self) -> bool {
        self != Window::Hourly
    }
}

/// A set of versioned windows: the boards a merchandising control acts on. Empty means
/// every one (a control put without windows acts on each board, the ones added later too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Windows(u8);

impl Windows {
    /// Every window (the empty set).
    pub const ALL: Windows = Windows(0);
    /// No window this release serves: a control stored for windows only a later release
    /// knows acts on none of these.
    pub const NONE: Windows = Windows(0x80);

    /// The set of `windows`; `None` when one of them is not versioned (hourly).
    pub fn of(windows: impl IntoIterator<Item = Window>) -> Option<Windows> {
        let mut set = 0;
        for w in windows {
            set |= Self::bit(w)?;
        }
        Some(Windows(set))
    }

    fn bit(window: Window) -> Option<u8> {
        match window {
            Window::Daily => Some(1),
            Window::Weekly => Some(2),
            Window::Trending => Some(4),
            Window::Hourly => None,
        }
    }

    /// Whether the set holds `window`.
    pub fn holds(self, window: Window) -> bool {
        Self::bit(window).is_some_and(|bit| self.0 == 0 || self.0 & bit != 0)
    }

    /// Whether the two sets share a window.
    pub fn meets(self, other: Windows) -> bool {
        self.0 == 0 || other.0 == 0 || self.0 & other.0 != 0
    }

    /// The windows named (none for [`Windows::ALL`]), in the API's order.
    pub fn named(self) -> impl Iterator<Item = Window> {
        Window::ALL.into_iter().filter(move |w| Self::bit(*w).is_some_and(|bit| self.0 & bit != 0))
    }
}

/// One board: a window's rankings (one per day) of a segment or the whole catalog, by one
/// scoring profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Board<'a> {
    pub window: Window,
    /// A segment's board; `None`: the whole ranking.
    pub segment: Option<Segment>,
    /// The scoring profile serving it; `None` when the service has only one.
    pub profile: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct() {
        let mut names: Vec<&str> = Window::ALL.iter().map(|w| w.name()).collect();
        names.dedup();
        assert_eq!(names, ["daily", "hourly", "weekly", "trending"]);
    }

    #[test]
    fn a_set_of_windows_holds_what_it_names_and_empty_is_every_one() {
        let daily = Windows::of([Window::Daily]).expect("versioned");
        assert!(daily.holds(Window::Daily) && !daily.holds(Window::Weekly) && !daily.holds(Window::Trending));
        assert!(!daily.holds(Window::Hourly), "no control acts on the hourly ranking");
        assert!(Windows::ALL.holds(Window::Trending) && Windows::ALL.named().count() == 0);
        assert_eq!(Windows::of([Window::Hourly]), None);
        let both = Windows::of([Window::Weekly, Window::Trending]).expect("versioned");
        assert_eq!(both.named().collect::<Vec<_>>(), vec![Window::Weekly, Window::Trending]);
        assert!(both.meets(Windows::ALL) && !both.meets(daily) && daily.meets(daily));
        assert_eq!(Windows::of([]), Some(Windows::ALL));
        assert!(Window::ALL.iter().all(|w| !Windows::NONE.holds(*w)) && Windows::NONE.named().count() == 0);
    }
}
