//! What a served board holds beyond its entries: the positions its pins placed, the controls
//! it was served under, and its annex, from which its organic board and ranks are read back.

use super::annex::Annex;
use super::{Scored, ServedParts, Snapshot, SnapshotError, ranking_order};

impl Snapshot {
    /// Positions (ascending) of the entries a pin placed.
    pub fn pinned(&self) -> &[u32] {
        &self.pinned
    }

    /// A board of `entries` with its served parts (`None`: an organic board, in ranking order).
    pub fn from_parts(entries: Vec<Scored>, parts: Option<ServedParts>) -> Result<Self, SnapshotError> {
        match parts {
            None => Self::from_ranked(entries),
            Some(ServedParts { acting, pinned, annex }) => {
                Ok(Self::from_served(entries, pinned)?.with_annex(annex).served_under(acting))
            }
        }
    }

    /// A served board from its entries in any order and its served parts: each pinned
    /// position holds the product the parts' annex says was served there, the other entries
    /// follow the ranking order around them. How a board stored as its changes against an
    /// earlier version is put back in its served order.
    pub fn served_from(entries: Vec<Scored>, parts: ServedParts) -> Result<Self, SnapshotError> {
        let mut placed: Vec<(u32, i64)> = Vec::with_capacity(parts.pinned.len());
        for &at in &parts.pinned {
            let touched = parts.annex.touched().iter().find(|t| t.served_at == Some(at));
            placed.push((at, touched.ok_or(SnapshotError::Pinned(at))?.product_id));
        }
        let mut ids: Vec<i64> = placed.iter().map(|(_, id)| *id).collect();
        ids.sort_unstable();
        let (mut pinned, mut others): (Vec<Scored>, Vec<Scored>) =
            entries.into_iter().partition(|e| ids.binary_search(&e.product_id).is_ok());
        others.sort_unstable_by(ranking_order);
        pinned.sort_unstable_by_key(|e| e.product_id);
        let mut served = Vec::with_capacity(others.len() + pinned.len());
        let mut rest = others.into_iter();
        for (at, id) in placed {
            let entry = pinned.binary_search_by_key(&id, |e| e.product_id).map_err(|_| SnapshotError::Pinned(at))?;
            while served.len() < at as usize {
                served.push(rest.next().ok_or(SnapshotError::Pinned(at))?);
            }
            served.push(pinned[entry]);
        }
        served.extend(rest);
        Self::from_parts(served, Some(parts))
    }

    /// Its served parts; `None` for a board no control acted on.
    pub fn served_parts(&self) -> Option<ServedParts> {
        if self.acting.is_empty() && self.pinned.is_empty() && self.annex.is_none() {
            return None;
        }
        Some(ServedParts {
            acting: self.acting.clone(),
            pinned: self.pinned.clone(),
            annex: self.annex.as_deref().cloned().unwrap_or_default(),
        })
    }

    /// The same board, noted as served under `acting` (control ids and revisions).
    pub fn served_under(mut self, mut acting: Vec<(String, u64)>) -> Self {
        acting.sort();
        self.acting = acting;
        self
    }

    /// The controls the board was served under, by id, with their revisions (empty: none).
    pub fn acting(&self) -> &[(String, u64)] {
        &self.acting
    }

    /// The same board with `annex`, what it keeps of its organic board (an empty one is
    /// none).
    pub fn with_annex(mut self, annex: Annex) -> Self {
        self.annex = (!annex.is_empty()).then(|| Box::new(annex));
        self
    }

    /// What the board keeps of its organic board, when a control touched it.
    pub fn annex(&self) -> Option<&Annex> {
        self.annex.as_deref()
    }

    /// The organic rank of the entry at `position` (0: the organic board lacks it).
    pub fn organic_rank(&self, position: usize) -> u64 {
        match &self.annex {
            Some(annex) => annex.organic_rank(position as u64, self.entry(position)),
            None => position as u64 + 1,
        }
    }

    /// The controls acting on `product_id` in this board, by id.
    pub fn control_ids(&self, product_id: i64) -> &[String] {
        self.annex.as_ref().and_then(|a| a.get(product_id)).map_or(&[], |t| &t.control_ids)
    }

    /// The organic board this one was served from, whole (itself when no control touched it).
    pub fn organic_board(&self) -> Vec<Scored> {
        let served = self.page(0, self.len() as u64);
        match &self.annex {
            Some(annex) => annex.organic_board(&served),
            None => served.into_owned(),
        }
    }
}
