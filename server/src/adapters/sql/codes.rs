//! The stored codes of the board vocabulary, read and written here alone, so that a stored
//! row keeps its meaning whatever the domain's types become:
//! - a window (`rank_history.board_window`) as the API numbers it: 1 daily, 2 hourly,
//!   3 weekly, 4 trending;
//! - a set of windows (`controls.windows`) as bits: 1 daily, 2 weekly, 4 trending; 0 every
//!   window (those added later too).

use crate::domain::board::{Window, Windows};

const WINDOW_CODES: [(Window, i16); 4] =
    [(Window::Daily, 1), (Window::Hourly, 2), (Window::Weekly, 3), (Window::Trending, 4)];

const WINDOW_BITS: [(Window, i16); 3] = [(Window::Daily, 1), (Window::Weekly, 2), (Window::Trending, 4)];

/// A window's stored code.
pub fn window_code(window: Window) -> i16 {
    WINDOW_CODES.iter().find(|(w, _)| *w == window).map_or(0, |(_, c)| *c)
}

/// A set of windows' stored bits.
pub fn windows_code(windows: Windows) -> i16 {
    windows.named().map(|w| WINDOW_BITS.iter().find(|(b, _)| *b == w).map_or(0, |(_, bit)| *bit)).sum()
}

/// The set of windows of stored bits. Bits this release does not know (windows of a later
/// release) are ignored; a set of only those is [`Windows::NONE`]: the control acts on no
/// board this release serves.
pub fn windows_of_code(code: i16) -> Windows {
    let known: i16 = WINDOW_BITS.iter().map(|(_, bit)| bit).sum();
    if code != 0 && code & known == 0 {
        return Windows::NONE;
    }
    let named = WINDOW_BITS.iter().filter(|(_, bit)| code & bit != 0).map(|(w, _)| *w);
    Windows::of(named).unwrap_or(Windows::ALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_codes_keep_their_meaning() {
        // The API's numbers (rank_history rows of earlier releases hold 1 and 3).
        assert_eq!(Window::ALL.map(window_code), [1, 2, 3, 4]);
        // Bits as controls were stored before the window type (0 = every window).
        assert_eq!(windows_code(Windows::ALL), 0);
        assert_eq!(windows_code(Windows::of([Window::Daily]).expect("set")), 1);
        assert_eq!(windows_code(Windows::of([Window::Weekly, Window::Trending]).expect("set")), 6);
        for code in 0..8 {
            assert_eq!(windows_code(windows_of_code(code)), code);
        }
        // A later release's window alone: no board of this one; beside a known one: that one.
        assert_eq!(windows_of_code(8), Windows::NONE);
        assert_eq!(windows_of_code(8 | 2), Windows::of([Window::Weekly]).expect("set"));
    }
}
