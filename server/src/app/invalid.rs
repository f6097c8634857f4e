//! Rejected input: which field (a structured path such as `events[3].amount`) broke which
//! rule. The gRPC edge renders the path (`grpc::error`); the application only builds it.
//!
//! A reason never copies a caller's value in full: [`quote`] keeps a short prefix and the
//! length, so a hostile megabyte-long field cannot turn into a megabyte-long error.

use crate::domain::event::FieldError;

/// Bytes of a rejected value quoted in an error message.
pub const QUOTE_LIMIT: usize = 64;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSegment {
    /// A message field by its wire name.
    Field(&'static str),
    /// An element of a repeated field.
    Index(usize),
}

/// Where in a request a rejected value is, outermost first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldPath(pub Vec<PathSegment>);

impl FieldPath {
    /// `events[3].amount`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for segment in &self.0 {
            match segment {
                PathSegment::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                PathSegment::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// A request field that broke a rule; nothing of the request was done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path:?}: {reason}")]
pub struct Invalid {
    /// The field.
    pub path: FieldPath,
    /// What is wrong, phrased so a caller can fix it.
    pub reason: String,
}

impl Invalid {
    /// `field: reason`.
    pub fn field(name: &'static str, reason: impl Into<String>) -> Self {
        Self { path: FieldPath(vec![PathSegment::Field(name)]), reason: reason.into() }
    }

    /// An element of a repeated scalar field is wrong: `name[index]`.
    pub fn element(name: &'static str, index: usize, reason: impl Into<String>) -> Self {
        Self { path: FieldPath(vec![PathSegment::Field(name), PathSegment::Index(index)]), reason: reason.into() }
    }

    /// `events[3].amount: must be 0 for VIEW`: the message INVALID_ARGUMENT carries and a
    /// dead-lettered bus record's `ranking-error` header.
    pub fn message(&self) -> String {
        format!("{}: {}", self.path.render(), self.reason)
    }

    /// The same error seen from the enclosing message: `parent.` in front of the path.
    pub fn within(mut self, parent: &'static str) -> Self {
        self.path.0.insert(0, PathSegment::Field(parent));
        self
    }

    /// The same error seen from a repeated field: `parent[index].` in front of the path.
    pub fn within_element(mut self, parent: &'static str, index: usize) -> Self {
        self.path.0.splice(0..0, [PathSegment::Field(parent), PathSegment::Index(index)]);
        self
    }
}

impl From<FieldError> for Invalid {
    fn from(e: FieldError) -> Self {
        Self::field(e.field, e.reason)
    }
}

/// A caller's value for an error message: in full when short, else its first
/// [`QUOTE_LIMIT`] bytes (cut at a character boundary) and its length.
pub fn quote(value: &str) -> String {
    if value.len() <= QUOTE_LIMIT {
        return format!("{value:?}");
    }
    let mut end = QUOTE_LIMIT;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}… ({} bytes)", &value[..end], value.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_nest_outermost_first() {
        let e = Invalid::field("amount", "must be 0").within_element("events", 3);
        assert_eq!(e.path.0, vec![PathSegment::Field("events"), PathSegment::Index(3), PathSegment::Field("amount")]);
        let e = Invalid::field("amount", "x").within("event");
        assert_eq!(e.path.0, vec![PathSegment::Field("event"), PathSegment::Field("amount")]);
    }

    #[test]
    fn long_values_are_quoted_by_a_prefix_and_their_length() {
        assert_eq!(quote("2026-4-1"), "\"2026-4-1\"");
        let huge = "\0".repeat(8_388_544);
        let q = quote(&huge);
        assert!(q.len() < 64 * 4 + 32, "{} bytes", q.len());
        assert!(q.ends_with("(8388544 bytes)"), "{q}");
        // A multi-byte character straddling the limit is not cut in half.
        let s = format!("{}é{}", "a".repeat(63), "b".repeat(100));
        assert!(quote(&s).starts_with(&format!("\"{}\"", "a".repeat(63))));
    }
}
