//! `RANKING_PROFILE`: the scoring profile's file, read and parsed by the profile's own text
//! form; a refusal names the file and the problem.

use std::path::Path;

use crate::domain::profile::{ScoringProfile, text};

/// The profile in the file at `path`.
pub fn load(path: &Path) -> Result<ScoringProfile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named() {
        let missing = Path::new("/nonexistent/profile.toml");
        assert!(load(missing).expect_err("no file").starts_with("/nonexistent/profile.toml: "));
    }
}
