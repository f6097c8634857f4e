//! What a served board (a board under merchandising controls) keeps of the organic board it
//! was derived from: every entry a control
//! touched, with its organic rank and score. It is small (the touched products only), and with
//! the served entries it is enough to give any entry its organic rank in O(log touched) and to
//! derive the organic board again, whole, without reading SQL: what republishing a board when
//! a control starts or ends, previews and ListMovers need.
//!
//! Why the organic rank of an untouched entry follows from its served place: the untouched
//! entries keep their organic order among themselves, so an untouched entry at served index
//! `s` has `s - A` untouched entries above it (`A`: touched entries served above it), and in the
//! organic board those plus the touched entries organically above it (`B`):
//! `organic_rank = 1 + s - A + B`.

use std::cmp::Ordering;

use super::{Scored, ranking_order};

/// A product a control touched (boosted, pinned or excluded).
#[derive(Debug, Clone, PartialEq)]
pub struct Touched {
    pub product_id: i64,
    /// Its organic rank and score; `None` for a pinned product the organic board lacks.
    pub organic: Option<(u64, f64)>,
    /// Its served index (0-based); `None` for an excluded product.
    pub served_at: Option<u32>,
    /// The controls acting on it, by id.
    pub control_ids: Vec<String>,
}

/// The touched entries of one served board, ascending by product id, with what its lookups
/// search.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Annex {
    touched: Vec<Touched>,
    /// Served indexes of the touched entries that are served, ascending.
    served_at: Vec<u32>,
    /// The touched entries' organic entries, in ranking order.
    organic: Vec<Scored>,
}

impl Annex {
    /// The annex of touched entries as stored (any order).
    pub fn from_touched(mut touched: Vec<Touched>) -> Self {
        touched.sort_by_key(|t| t.product_id);
        let mut served_at: Vec<u32> = touched.iter().filter_map(|t| t.served_at).collect();
        served_at.sort_unstable();
        let mut organic: Vec<Scored> = touched
            .iter()
            .filter_map(|t| t.organic.map(|(_, score)| Scored { product_id: t.product_id, score }))
            .collect();
        organic.sort_by(ranking_order);
        Self { touched, served_at, organic }
    }

    /// Whether no control touched the board: its served board is its organic one.
    pub fn is_empty(&self) -> bool {
        self.touched.is_empty()
    }

    /// The touched entries, ascending by product id.
    pub fn touched(&self) -> &[Touched] {
        &self.touched
    }

    /// The touched entry of `product_id`, if a control touched it.
    pub fn get(&self, product_id: i64) -> Option<&Touched> {
        self.touched.binary_search_by_key(&product_id, |t| t.product_id).ok().map(|i| &self.touched[i])
    }

    /// The organic rank of `entry`, served at index `served_at` (0: the organic board lacks it).
    pub fn organic_rank(&self, served_at: u64, entry: Scored) -> u64 {
        if let Some(t) = self.get(entry.product_id) {
            return t.organic.map_or(0, |(rank, _)| rank);
        }
        let above_served = self.served_at.partition_point(|at| u64::from(*at) < served_at) as u64;
        let above_organic = self.organic.partition_point(|t| ranking_order(t, &entry) == Ordering::Less) as u64;
        1 + served_at - above_served + above_organic
    }

    /// The organic board again: the untouched served entries (in organic order among
    /// themselves) merged with the touched entries the organic board held.
    pub fn organic_board(&self, served: &[Scored]) -> Vec<Scored> {
        let untouched = served.iter().filter(|e| self.get(e.product_id).is_none());
        let mut board = Vec::with_capacity(served.len() + self.organic.len());
        let mut touched = self.organic.iter().peekable();
        for e in untouched {
            while let Some(t) = touched.next_if(|t| ranking_order(t, e) == Ordering::Less) {
                board.push(*t);
            }
            board.push(*e);
        }
        board.extend(touched);
        board
    }
}
