//! CompareRankings' read: the two tops read as GetTopN reads them (each from one version),
//! compared by [`crate::domain::compare`].

use super::Queries;
use super::types::{QueryError, TopQuery};
use crate::app::invalid::Invalid;
use crate::domain::compare::{Comparison, compare};

/// Depth compared when the request says 0.
pub const DEFAULT_DEPTH: u32 = 100;

/// RBO's persistence when the request says 0.
pub const DEFAULT_PERSISTENCE: f64 = 0.9;

/// Two tops compared, and the versions they were read from.
#[derive(Debug, Clone)]
pub struct CompareAnswer {
    pub comparison: Comparison,
    pub version_a: Option<u64>,
    pub version_b: Option<u64>,
}

impl Queries {
    /// Compares the first `a.limit` entries (0: [`DEFAULT_DEPTH`]) of the boards `a` and `b`
    /// name, each read by its profile's queries, at RBO persistence `persistence` (0:
    /// [`DEFAULT_PERSISTENCE`]).
    pub async fn compare(
        (reads_a, a): (&Queries, TopQuery),
        (reads_b, b): (&Queries, TopQuery),
        persistence: f64,
    ) -> Result<CompareAnswer, QueryError> {
        let p = if persistence == 0.0 { DEFAULT_PERSISTENCE } else { persistence };
        if !(p > 0.0 && p < 1.0) {
            return Err(Invalid::field("persistence", format!("must be in (0, 1), got {persistence}")).into());
        }
        let depth = if a.limit == 0 { DEFAULT_DEPTH } else { a.limit };
        for (name, q) in [("a", &a), ("b", &b)] {
            if q.page_token.is_some() {
                return Err(Invalid::field("page_token", "must be empty: a comparison reads the top")
                    .within(name)
                    .into());
            }
            if q.offset != 0 {
                return Err(Invalid::field("offset", "must be 0: a comparison reads the top").within(name).into());
            }
        }
        async fn read(
            reads: &Queries,
            q: TopQuery,
            depth: u32,
            name: &'static str,
        ) -> Result<std::sync::Arc<super::TopAnswer>, QueryError> {
            reads.top(TopQuery { limit: depth, ..q }).await.map_err(|e| match e {
                QueryError::Invalid(invalid) => QueryError::Invalid(invalid.within(name)),
                other => other,
            })
        }
        let (top_a, top_b) = tokio::try_join!(read(reads_a, a, depth, "a"), read(reads_b, b, depth, "b"))?;
        let ids = |t: &super::TopAnswer| t.entries.iter().map(|e| e.product_id).collect::<Vec<i64>>();
        Ok(CompareAnswer {
            comparison: compare(&ids(&top_a), &ids(&top_b), depth as usize, p),
            version_a: top_a.version,
            version_b: top_b.version,
        })
    }
}
