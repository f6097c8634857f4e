//! The names a board of the ranking feed goes by on a bus, as producers and consumers both
//! spell them: its Kafka key (and message-id stem), and its JetStream subject.

use crate::v1::{BoardKey, Window};

/// The window as the names spell it (an unset or unknown one is the daily board's).
fn window(board: &BoardKey) -> &'static str {
    match Window::try_from(board.window) {
        Ok(Window::Unspecified) | Err(_) => Window::Daily.name(),
        Ok(w) => w.name(),
    }
}

/// `window/date/segment/profile` (the segment empty for the whole ranking): the Kafka key of
/// the board's records, and the stem of their JetStream message ids.
pub fn board_name(board: &BoardKey) -> String {
    format!("{}/{}/{}/{}", window(board), board.date, board.segment, board.profile)
}

/// `<prefix>.<profile>.<window>.<segment or _all>`, a `.` in the segment written `%2E` (a
/// subject token ends at a dot).
pub fn subject(prefix: &str, board: &BoardKey) -> String {
    let segment = if board.segment.is_empty() { "_all".to_string() } else { board.segment.replace('.', "%2E") };
    format!("{prefix}.{}.{}.{segment}", board.profile, window(board))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_spell_the_board() {
        let board = BoardKey {
            window: Window::Weekly as i32,
            date: "2026-12-05".into(),
            segment: "brand.acme".into(),
            profile: "default".into(),
        };
        assert_eq!(board_name(&board), "weekly/2026-12-05/brand.acme/default");
        assert_eq!(subject("feed", &board), "feed.default.weekly.brand%2Eacme");
        let whole = BoardKey { segment: String::new(), window: Window::Daily as i32, ..board };
        assert_eq!(subject("feed", &whole), "feed.default.daily._all");
        // Each window its own name: the trending board's records never share the daily
        // board's message ids (JetStream would drop them as duplicates).
        let trending = BoardKey { window: Window::Trending as i32, ..whole.clone() };
        assert_eq!(board_name(&trending), "trending/2026-12-05//default");
        assert_eq!(subject("feed", &trending), "feed.default.trending._all");
        assert_ne!(board_name(&trending), board_name(&whole));
    }
}
