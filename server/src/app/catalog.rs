//! UpdateCatalog and GetCatalog: each product's segments, hidden flag and title, stored in SQL. Hiding takes
//! effect at once (today's rankings get a version without the product, on every replica
//! within a poll); segment changes and un-hiding at the next recompute.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::invalid::{Invalid, quote};
use super::policy::Policy;
use super::recompute::{RecomputeError, Withdrawals};
use crate::domain::catalog::{CatalogEntry, MAX_SEGMENTS, MAX_TITLE_CHARS, segment_problem};
use crate::ports::{CatalogRows, StoreError};

/// Most entries of one UpdateCatalog.
pub const MAX_ENTRIES: usize = 10_000;

/// Most products of one GetCatalog: a page's.
pub const MAX_READ: usize = 1_000;

/// Why an UpdateCatalog did not take effect.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// An entry broke a rule; nothing was written.
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// The database failed; nothing was written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The entries are stored, but the hidden ones could not be taken out of today's rankings
    /// yet (the call may be repeated; the next recompute excludes them anyway).
    #[error("catalog stored, but hidden products are not out of today's rankings yet: {0}")]
    Withdrawal(#[from] RecomputeError),
}

/// The catalog service.
pub struct Catalog {
    store: Arc<dyn CatalogRows>,
    /// Every profile's withdrawals.
    withdrawals: Vec<Arc<Withdrawals>>,
    policy: Arc<Policy>,
}

impl Catalog {
    /// Stores in `store`; hidden products leave every profile's rankings of today through
    /// its `withdrawals`.
    pub fn new(store: Arc<dyn CatalogRows>, withdrawals: Vec<Arc<Withdrawals>>, policy: Arc<Policy>) -> Self {
        Self { store, withdrawals, policy }
    }

    /// The catalog entries of `ids` (1-[`MAX_READ`] products, each ≥ 1; repeats read once),
    /// in ascending product order, and the products without one, in request order.
    pub async fn entries(&self, ids: &[i64]) -> Result<(Vec<CatalogEntry>, Vec<i64>), CatalogError> {
        if ids.is_empty() || ids.len() > MAX_READ {
            return Err(
                Invalid::field("product_ids", format!("must name 1-{MAX_READ} products, got {}", ids.len())).into()
            );
        }
        if let Some((i, id)) = ids.iter().enumerate().find(|(_, id)| **id < 1) {
            return Err(Invalid::element("product_ids", i, format!("must be >= 1, got {id}")).into());
        }
        let entries = self.store.catalog_entries(ids).await?;
        let found: HashSet<i64> = entries.iter().map(|e| e.product_id).collect();
        let mut seen = HashSet::new();
        let missing = ids.iter().copied().filter(|id| !found.contains(id) && seen.insert(*id)).collect();
        Ok((entries, missing))
    }

    /// Validates every entry (nothing is written when one is refused), stores them in one
    /// transaction, then takes the hidden ones out of today's rankings. Returns the entries
    /// stored.
    pub async fn update(&self, entries: Vec<CatalogEntry>) -> Result<u32, CatalogError> {
        let entries = validated(entries)?;
        self.store.update_catalog(&entries).await?;
        let hidden: HashSet<i64> = entries.iter().filter(|e| e.hidden).map(|e| e.product_id).collect();
        let today = self.policy.today(self.policy.now());
        for withdrawals in &self.withdrawals {
            withdrawals.withdraw(today, &hidden).await?;
        }
        Ok(entries.len() as u32)
    }
}

/// The entries with their segment sets sorted and without repeats, or the first problem,
/// naming its field (`products[3].segments[1]`).
fn validated(mut entries: Vec<CatalogEntry>) -> Result<Vec<CatalogEntry>, Invalid> {
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return Err(Invalid::field("products", format!("must hold 1-{MAX_ENTRIES} entries, got {}", entries.len())));
    }
    let mut seen: HashMap<i64, usize> = HashMap::with_capacity(entries.len());
    for (i, e) in entries.iter_mut().enumerate() {
        if e.product_id < 1 {
            let reason = format!("must be >= 1, got {}", e.product_id);
            return Err(Invalid::field("product_id", reason).within_element("products", i));
        }
        if let Some(first) = seen.insert(e.product_id, i) {
            let reason = format!("repeats products[{first}]; name a product once");
            return Err(Invalid::field("product_id", reason).within_element("products", i));
        }
        if e.segments.len() > MAX_SEGMENTS {
            let reason = format!("at most {MAX_SEGMENTS} per product, got {}", e.segments.len());
            return Err(Invalid::field("segments", reason).within_element("products", i));
        }
        for (j, name) in e.segments.iter().enumerate() {
            if let Some(problem) = segment_problem(name) {
                let reason = format!("{} {problem}", quote(name));
                return Err(Invalid::element("segments", j, reason).within_element("products", i));
            }
        }
        let title = e.title.chars().count();
        if title > MAX_TITLE_CHARS {
            let reason = format!("must be at most {MAX_TITLE_CHARS} characters, got {title}");
            return Err(Invalid::field("title", reason).within_element("products", i));
        }
        e.segments.sort_unstable();
        e.segments.dedup();
    }
    Ok(entries)
}
