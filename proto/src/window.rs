//! A window's name on the command line and on a bus (the feed's keys and subjects): its enum
//! name without the `WINDOW_` prefix, in lower case, as the server's own vocabulary spells it.

use crate::v1::Window;

impl Window {
    /// `daily`, `hourly`, `weekly`, `trending`; `unspecified` for the unset value.
    pub fn name(self) -> &'static str {
        match self {
            Window::Unspecified => "unspecified",
            Window::Daily => "daily",
            Window::Hourly => "hourly",
            Window::Weekly => "weekly",
            Window::Trending => "trending",
        }
    }

    /// The window a [`Window::name`] names (`unspecified` is none).
    pub fn named(name: &str) -> Option<Window> {
        [Window::Daily, Window::Hourly, Window::Weekly, Window::Trending].into_iter().find(|w| w.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_the_enum_name_in_lower_case() {
        for w in [Window::Daily, Window::Hourly, Window::Weekly, Window::Trending] {
            assert_eq!(format!("WINDOW_{}", w.name().to_uppercase()), w.as_str_name());
            assert_eq!(Window::named(w.name()), Some(w));
        }
        assert_eq!(Window::named("unspecified"), None);
    }
}
