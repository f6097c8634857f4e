//! The served board as a held copy needs it: its entries, its pins' positions and its annex
//! ([`ServedCopy`]), derived from the organic board by the rules of [`super::served`] with
//! one 16-byte entry per product. Only the products a control touches (a few thousand at
//! most) carry more: their organic rank and score, and the controls acting on them.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Action, Control};
use crate::snapshot::annex::{Annex, Touched};
use crate::snapshot::{Scored, Snapshot, SnapshotError, ranking_order};

/// A served board: its entries, best first; the positions (ascending) its pins placed; and
/// every entry a control touched, excluded ones included.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServedCopy {
    pub entries: Vec<Scored>,
    pub pinned: Vec<u32>,
    pub annex: Annex,
}

impl ServedCopy {
    /// The board as a held copy, noted as served under `acting` (the controls acting on it,
    /// with their revisions), its product index mapped from `before`'s (a board of the same
    /// organic entries: that organic board itself, or its version served under other
    /// controls) rather than sorted: only the products a control touched, in either, changed
    /// places otherwise than by the others moving around them.
    pub fn snapshot_after(self, before: &Snapshot, acting: Vec<(String, u64)>) -> Result<Snapshot, SnapshotError> {
        let before_touched = before.annex().map(|a| a.touched()).unwrap_or_default();
        let mut touched: Vec<i64> = self.annex.touched().iter().chain(before_touched).map(|t| t.product_id).collect();
        touched.sort_unstable();
        touched.dedup();
        let snapshot = Snapshot::from_served_after(before, self.entries, self.pinned, &touched)?;
        Ok(snapshot.with_annex(self.annex).served_under(acting))
    }
}

/// The served board of `organic` (in ranking order) under the active `controls`.
/// `boost(score, points)` is a score with its main score raised by `points`.
pub fn serve_copy<'c>(
    organic: &[Scored],
    controls: impl IntoIterator<Item = &'c Control>,
    boost: impl Fn(f64, f64) -> f64,
) -> ServedCopy {
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
    let ids = |ids: &[&str]| ids.iter().map(|s| s.to_string()).collect::<Vec<String>>();

    // 1 and 2 in one pass: an untouched entry keeps its place among the untouched (the organic
    // board is in ranking order), excluded ones leave, boosted ones are set aside with their
    // new scores and merged back in ranking order, pinned ones are set aside for step 3. The
    // touched products are at most a few thousand: one hash lookup per entry, no sort of the
    // board.
    let touched: HashSet<i64> = exclusions.keys().chain(boosts.keys()).chain(pinned.iter()).copied().collect();
    let mut untouched: Vec<Scored> = Vec::with_capacity(organic.len());
    let mut moved: Vec<(Scored, Touched)> = Vec::new();
    let mut placed: HashMap<i64, (Scored, Touched)> = HashMap::new();
    let mut annexed: Vec<Touched> = Vec::new();
    for (e, organic_rank) in organic.iter().zip(1u64..) {
        if !touched.contains(&e.product_id) {
            untouched.push(*e);
            continue;
        }
        let organic = Some((organic_rank, e.score));
        if let Some(by) = exclusions.get(&e.product_id) {
            annexed.push(Touched { product_id: e.product_id, organic, served_at: None, control_ids: ids(by) });
            continue;
        }
        let mut entry = *e;
        let mut control_ids = Vec::new();
        if let Some((sum, by)) = boosts.get(&e.product_id) {
            if *sum != 0.0 {
                entry.score = boost(e.score, *sum);
            }
            control_ids = ids(by);
        }
        let t = Touched { product_id: e.product_id, organic, served_at: None, control_ids };
        match pinned.contains(&e.product_id) {
            true => drop(placed.insert(e.product_id, (entry, t))),
            false => moved.push((entry, t)),
        }
    }
    let (rest, mut moved) = merged(untouched, moved);

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
    let mut positions = Vec::with_capacity(at.len());
    let mut rest = rest.into_iter().enumerate();
    // The moved entries' places in `rest`, ascending: each gets its served position as it
    // is passed.
    moved.reverse();
    let mut take = |entries: &mut Vec<Scored>, annexed: &mut Vec<Touched>, until: usize| {
        while entries.len() < until {
            let Some((i, e)) = rest.next() else { break };
            if moved.last().is_some_and(|(at, _)| *at == i)
                && let Some((_, mut t)) = moved.pop()
            {
                t.served_at = Some(entries.len() as u32);
                annexed.push(t);
            }
            entries.push(e);
        }
    };
    for (&i, pin) in &at {
        take(&mut entries, &mut annexed, i);
        let (entry, mut t) = placed.remove(&pin.product_id).unwrap_or_else(|| {
            let entry = Scored { product_id: pin.product_id, score: 0.0 };
            (entry, Touched { product_id: pin.product_id, organic: None, served_at: None, control_ids: Vec::new() })
        });
        t.control_ids.push(pin.control_id.to_string());
        t.control_ids.sort();
        t.served_at = Some(entries.len() as u32);
        positions.push(entries.len() as u32);
        annexed.push(t);
        entries.push(entry);
    }
    take(&mut entries, &mut annexed, usize::MAX);
    ServedCopy { entries, pinned: positions, annex: Annex::from_touched(annexed) }
}

/// Two boards in ranking order as one: `moved` (a few boosted entries, in any order) sorted
/// and merged into `untouched`; with each moved entry's place in the result, ascending.
fn merged(untouched: Vec<Scored>, mut moved: Vec<(Scored, Touched)>) -> (Vec<Scored>, Vec<(usize, Touched)>) {
    if moved.is_empty() {
        return (untouched, Vec::new());
    }
    moved.sort_by(|a, b| ranking_order(&a.0, &b.0));
    let mut board = Vec::with_capacity(untouched.len() + moved.len());
    let mut places = Vec::with_capacity(moved.len());
    let mut moved = moved.into_iter().peekable();
    for entry in untouched {
        while let Some((m, t)) = moved.next_if(|(m, _)| ranking_order(m, &entry).is_lt()) {
            places.push((board.len(), t));
            board.push(m);
        }
        board.push(entry);
    }
    for (m, t) in moved {
        places.push((board.len(), t));
        board.push(m);
    }
    (board, places)
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
