//! The served board derived from the organic one under the controls active on it.
//!
//! A board's served ranking is a pure function of its organic ranking and the controls
//! active at the version's publication, applied in this order:
//!
//! 1. **Exclude**: excluded products leave the board. Nothing else changes: the population
//!    and every norm stay the organic ones (unlike a hidden product, an exclusion changes no
//!    other product's score).
//! 2. **Boost** (negative points bury): a boosted product's main score gets the sum of its
//!    active boosts' points (added in ascending control id, so the sum is one double whatever
//!    the order the controls came in) and is encoded again with its own tie-break norms; the
//!    board is sorted again by the ranking's order (score descending, then product id
//!    descending). A sum of exactly 0 leaves the score as it was. The main score a boost adds
//!    to is the one the organic score carries, its integer part ([`boosted`]): a version keeps
//!    nothing finer, so a board republished from it when a control changes, and a caller
//!    checking the served board against the organic one it read, get the same double.
//! 3. **Pin**: each pinned product is taken from wherever it is, with its score as boosted
//!    (also when it had no entry: organic rank 0, score 0), and placed at its position, the others moving down. A product
//!    pinned twice takes its smallest position. Pins are placed in the order (position,
//!    `active_from`, control id): each takes the first free position at or after its own, or,
//!    when none is left (pins beyond the board's end), the last free one before it, so a
//!    position beyond the end places it last.
//!
//! A product never appears twice; the served board's length is its `total`. Products no
//! control touches keep their organic order among themselves.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Action, Control};
use crate::layout::Layout;
use crate::snapshot::annex::{Annex, Touched};
use crate::snapshot::{Scored, Snapshot, SnapshotError, ranking_order};

/// An entry of the served board.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedEntry {
    pub product_id: i64,
    /// The served score: the organic one, or re-encoded by a boost; 0 for a pinned product
    /// without an organic entry.
    pub score: f64,
    /// Its rank in the organic board (1-based); 0 when it had none.
    pub organic_rank: u64,
    /// Its score in the organic board; 0 when it had none.
    pub organic_score: f64,
    /// The controls that moved or placed it (boosts acting on it, the pin that placed it),
    /// in ascending id.
    pub control_ids: Vec<String>,
    /// Placed by a pin: its rank is its position, whatever its score.
    pub pinned: bool,
}

/// `score` with `points` added to the main score it packs in `layout`, its norms kept: the
/// new main's integer part is `floor(main_floor + points)`, clamped to the layout's range
/// (a bury never goes below 0). A score the layout cannot decode is left as it is.
pub fn boosted(layout: &Layout, score: f64, points: f64) -> f64 {
    let Some(breakdown) = layout.decode(score) else { return score };
    let floor = (breakdown.main_floor as f64 + points).floor();
    // Beyond i64 either way, the clamp takes the sign: the float-to-int cast saturates.
    let (floor, _) = layout.clamp(floor as i64);
    layout.encode(floor, breakdown.norms())
}

/// A served board, and the organic entries its exclusions took off.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Served {
    /// The served entries, best first.
    pub entries: Vec<ServedEntry>,
    /// The excluded entries of the organic board (`score` and `organic_rank` as organic;
    /// `control_ids` the exclusions), in organic order.
    pub excluded: Vec<ServedEntry>,
}

impl Served {
    /// Its annex: every served entry with a control, and every excluded one.
    pub fn annex(&self) -> Annex {
        let touched = self
            .entries
            .iter()
            .zip(0u32..)
            .filter(|(e, _)| !e.control_ids.is_empty())
            .map(|(e, at)| Touched {
                product_id: e.product_id,
                organic: (e.organic_rank > 0).then_some((e.organic_rank, e.organic_score)),
                served_at: Some(at),
                control_ids: e.control_ids.clone(),
            })
            .chain(self.excluded.iter().map(|e| Touched {
                product_id: e.product_id,
                organic: Some((e.organic_rank, e.score)),
                served_at: None,
                control_ids: e.control_ids.clone(),
            }))
            .collect();
        Annex::from_touched(touched)
    }

    /// The served board as a held copy: its entries, its pins' positions and its annex, noted
    /// as served under `acting` (the controls acting on it, with their revisions).
    pub fn snapshot(&self, acting: Vec<(String, u64)>) -> Result<Snapshot, SnapshotError> {
        let snapshot = Snapshot::from_served(self.scored(), pinned_positions(&self.entries))?;
        Ok(snapshot.with_annex(self.annex()).served_under(acting))
    }

    /// [`Served::snapshot`], its product index mapped from `before`'s (a board served from the
    /// same organic board under other controls, or that organic board itself) rather than
    /// sorted: only the products a control touched, in either, changed places otherwise than
    /// by the others moving around them.
    pub fn snapshot_after(&self, before: &Snapshot, acting: Vec<(String, u64)>) -> Result<Snapshot, SnapshotError> {
        let annex = self.annex();
        let before_touched = before.annex().map(|a| a.touched()).unwrap_or_default();
        let mut touched: Vec<i64> = annex.touched().iter().chain(before_touched).map(|t| t.product_id).collect();
        touched.sort_unstable();
        touched.dedup();
        let snapshot = Snapshot::from_served_after(before, self.scored(), pinned_positions(&self.entries), &touched)?;
        Ok(snapshot.with_annex(annex).served_under(acting))
    }

    fn scored(&self) -> Vec<Scored> {
        self.entries.iter().map(|e| Scored { product_id: e.product_id, score: e.score }).collect()
    }
}

/// The served board of `organic` (in ranking order) under the active `controls`.
/// `boost(score, points)` is a score with its main score raised by `points` ([`boosted`] in
/// the board's layout).
pub fn serve<'c>(
    organic: &[Scored],
    controls: impl IntoIterator<Item = &'c Control>,
    boost: impl Fn(f64, f64) -> f64,
) -> Served {
    let mut sorted: Vec<&Control> = controls.into_iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));

    // Each excluded product's exclusions, in ascending control id.
    let mut exclusions: HashMap<i64, Vec<&str>> = HashMap::new();
    for c in &sorted {
        if let Action::Exclude { product_ids } = &c.action {
            for product_id in product_ids.iter().copied().collect::<HashSet<i64>>() {
                exclusions.entry(product_id).or_default().push(c.id.as_str());
            }
        }
    }
    let excluded: HashSet<i64> = exclusions.keys().copied().collect();

    // Each product's boosts, in ascending control id.
    let mut boosts: HashMap<i64, (f64, Vec<&str>)> = HashMap::new();
    for c in &sorted {
        if let Action::Boost { product_ids, points } = &c.action {
            let unique: HashSet<i64> = product_ids.iter().copied().collect();
            for product_id in unique {
                let (sum, ids) = boosts.entry(product_id).or_insert((0.0, Vec::new()));
                *sum += *points;
                ids.push(c.id.as_str());
            }
        }
    }

    let pins = placed_pins(&sorted, &excluded);
    let pinned: HashSet<i64> = pins.iter().map(|p| p.product_id).collect();

    // 1 and 2 in one pass: an untouched entry keeps its place among the untouched (the organic
    // board is in ranking order), excluded ones leave, boosted ones are set aside with their
    // new scores and merged back in ranking order, pinned ones are set aside for step 3. The
    // touched products are at most a few thousand: one hash lookup per entry, no sort of the
    // board.
    let touched: HashSet<i64> = exclusions.keys().chain(boosts.keys()).chain(pinned.iter()).copied().collect();
    let mut untouched: Vec<ServedEntry> = Vec::with_capacity(organic.len());
    let mut moved: Vec<ServedEntry> = Vec::new();
    let mut placed: HashMap<i64, ServedEntry> = HashMap::new();
    let mut taken_off: Vec<ServedEntry> = Vec::new();
    for (e, organic_rank) in organic.iter().zip(1u64..) {
        let mut entry = ServedEntry {
            product_id: e.product_id,
            score: e.score,
            organic_rank,
            organic_score: e.score,
            control_ids: Vec::new(),
            pinned: false,
        };
        if !touched.contains(&e.product_id) {
            untouched.push(entry);
            continue;
        }
        if let Some(ids) = exclusions.get(&e.product_id) {
            entry.control_ids = ids.iter().map(|s| s.to_string()).collect();
            taken_off.push(entry);
            continue;
        }
        if let Some((sum, ids)) = boosts.get(&e.product_id) {
            if *sum != 0.0 {
                entry.score = boost(e.score, *sum);
            }
            entry.control_ids = ids.iter().map(|s| s.to_string()).collect();
        }
        match pinned.contains(&e.product_id) {
            true => drop(placed.insert(e.product_id, entry)),
            false => moved.push(entry),
        }
    }
    let rest = merged(untouched, moved);

    // 3: each pinned product at the place it takes among all the served entries (with its
    // score as boosted, or 0 without an organic entry).
    let total = rest.len() + pins.len();
    let mut at: BTreeMap<usize, &PlacedPin> = BTreeMap::new();
    for pin in &pins {
        let wanted = (pin.position as usize).min(total) - 1;
        let free =
            (wanted..total).find(|i| !at.contains_key(i)).or_else(|| (0..wanted).rev().find(|i| !at.contains_key(i)));
        if let Some(i) = free {
            at.insert(i, pin);
        }
    }
    let mut entries = Vec::with_capacity(total);
    let mut rest = rest.into_iter();
    for (&i, pin) in &at {
        entries.extend(rest.by_ref().take(i - entries.len()));
        let mut entry = placed.remove(&pin.product_id).unwrap_or(ServedEntry {
            product_id: pin.product_id,
            score: 0.0,
            organic_rank: 0,
            organic_score: 0.0,
            control_ids: Vec::new(),
            pinned: true,
        });
        entry.pinned = true;
        entry.control_ids.push(pin.control_id.to_string());
        entry.control_ids.sort();
        entries.push(entry);
    }
    entries.extend(rest);
    Served { entries, excluded: taken_off }
}

/// Two boards in ranking order as one: `moved` (a few boosted entries, in any order) sorted
/// and merged into `untouched`.
fn merged(untouched: Vec<ServedEntry>, mut moved: Vec<ServedEntry>) -> Vec<ServedEntry> {
    if moved.is_empty() {
        return untouched;
    }
    let order = |a: &ServedEntry, b: &ServedEntry| {
        ranking_order(
            &Scored { product_id: a.product_id, score: a.score },
            &Scored { product_id: b.product_id, score: b.score },
        )
    };
    moved.sort_by(order);
    let mut board = Vec::with_capacity(untouched.len() + moved.len());
    let mut moved = moved.into_iter().peekable();
    for entry in untouched {
        while let Some(m) = moved.next_if(|m| order(m, &entry).is_lt()) {
            board.push(m);
        }
        board.push(entry);
    }
    board.extend(moved);
    board
}

/// The competition rank of each served entry: a pinned entry's is its own rank (its place is
/// not its score's); the others share theirs with the first entry of their score no pin
/// placed, so equal scores share a rank as on an organic board, a pin between them or not.
/// ([`crate::snapshot::Snapshot::tied_head`] finds the same in a held copy.)
pub fn tied_ranks(served: &[ServedEntry]) -> Vec<u64> {
    let mut ranks = Vec::with_capacity(served.len());
    let mut last_unpinned: Option<(f64, u64)> = None;
    for (i, e) in served.iter().enumerate() {
        let rank = match last_unpinned {
            _ if e.pinned => i as u64 + 1,
            Some((score, rank)) if score.total_cmp(&e.score).is_eq() => rank,
            _ => i as u64 + 1,
        };
        if !e.pinned {
            last_unpinned = Some((e.score, rank));
        }
        ranks.push(rank);
    }
    ranks
}

/// The positions (0-based, ascending) of the pinned entries: what a held copy of the board
/// needs beside its entries.
pub fn pinned_positions(served: &[ServedEntry]) -> Vec<u32> {
    served.iter().zip(0u32..).filter(|(e, _)| e.pinned).map(|(_, at)| at).collect()
}

/// A pin that places its product: the product's smallest position among its pins.
#[derive(Debug)]
struct PlacedPin<'a> {
    product_id: i64,
    position: u32,
    active_from_us: i64,
    control_id: &'a str,
}

/// One pin per pinned product that is not excluded (its smallest position; on a tie, the
/// earlier, then the smaller id), in the order they are placed.
fn placed_pins<'a>(controls: &[&'a Control], excluded: &HashSet<i64>) -> Vec<PlacedPin<'a>> {
    let mut best: HashMap<i64, PlacedPin<'a>> = HashMap::new();
    for c in controls {
        let Action::Pin { product_id, position } = c.action else { continue };
        if excluded.contains(&product_id) || position == 0 {
            continue;
        }
        let pin = PlacedPin { product_id, position, active_from_us: c.active_from_us, control_id: &c.id };
        match best.get(&product_id) {
            Some(kept) if placing_order(kept, &pin).is_le() => {}
            _ => drop(best.insert(product_id, pin)),
        }
    }
    let mut pins: Vec<PlacedPin<'a>> = best.into_values().collect();
    pins.sort_by(placing_order);
    pins
}

fn placing_order(a: &PlacedPin<'_>, b: &PlacedPin<'_>) -> std::cmp::Ordering {
    (a.position, a.active_from_us, a.control_id).cmp(&(b.position, b.active_from_us, b.control_id))
}

#[cfg(test)]
#[path = "served_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "annex_tests.rs"]
mod annex_tests;
