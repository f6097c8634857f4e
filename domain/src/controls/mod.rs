//! Merchandising controls: a pin, a boost (or bury) or an exclusion of one board, from a start
//! to an end. This module says what a control is, which boards it acts on and when, what a
//! valid one holds and how many a board may carry; [`served`] derives the served board (and
//! the annex it keeps of the organic one, `crate::snapshot::annex`).

mod copy;
pub mod served;

pub use crate::board::{Board, Window, Windows};
use crate::catalog::{Segment, name_problem, segment_problem};

pub use copy::{ServedCopy, serve_copy};
pub use served::{Served, ServedEntry, boosted, pinned_positions, serve, tied_ranks};

/// Most controls stored.
pub const MAX_STORED: usize = 10_000;
/// Most controls active at once on one board.
pub const MAX_ACTIVE_PER_BOARD: usize = 1_000;
/// Most pins active at once on one board.
pub const MAX_PINS_PER_BOARD: usize = 100;
/// Longest note, in characters.
pub const MAX_NOTE_CHARS: usize = 256;
/// Longest control id.
pub const MAX_ID_LEN: usize = 64;
/// Largest pin position.
pub const MAX_POSITION: u32 = 1_000;
/// Most products of one boost.
pub const MAX_BOOST_PRODUCTS: usize = 1_000;
/// Most products of one exclusion.
pub const MAX_EXCLUDED_PRODUCTS: usize = 10_000;
/// Largest |points| of a boost.
pub const MAX_POINTS: f64 = 1e6;

/// What a control does to a board.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Places `product_id` at `position` (1-based).
    Pin { product_id: i64, position: u32 },
    /// Adds `points` to the main score of each product (negative: buries).
    Boost { product_ids: Vec<i64>, points: f64 },
    /// Takes the products off the board.
    Exclude { product_ids: Vec<i64> },
}

impl Action {
    /// The kind's name, as metrics label it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Pin { .. } => "pin",
            Self::Boost { .. } => "boost",
            Self::Exclude { .. } => "exclude",
        }
    }
}

/// A merchandising control, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Control {
    /// `[a-z0-9][a-z0-9_.-]{0,63}`: the last tie-break between pins, and what a served entry
    /// names.
    pub id: String,
    /// The board it acts on: a segment's ranking, or the whole ranking.
    pub segment: Option<Segment>,
    /// The windows it acts on.
    pub windows: Windows,
    /// The scoring profile it acts on; `None`: every one.
    pub profile: Option<String>,
    /// Start, Unix microseconds (inclusive): the first tie-break between pins.
    pub active_from_us: i64,
    /// End, Unix microseconds (exclusive); `None`: until deleted.
    pub active_until_us: Option<i64>,
    pub action: Action,
    /// Why, for the next merchandiser.
    pub note: String,
    /// Set by the store: grows with every change of any control.
    pub revision: u64,
    /// Set by the store: when it was last put, Unix microseconds.
    pub updated_at_us: i64,
}

impl Control {
    /// Whether it is active at `at_us`: from its start (inclusive) to its end (exclusive).
    pub fn active_at(&self, at_us: i64) -> bool {
        self.active_from_us <= at_us && self.active_until_us.is_none_or(|until| at_us < until)
    }

    /// Whether it acts on `board`.
    pub fn acts_on(&self, board: &Board<'_>) -> bool {
        self.segment == board.segment
            && self.windows.holds(board.window)
            && match (&self.profile, board.profile) {
                (None, _) => true,
                (Some(mine), Some(theirs)) => mine == theirs,
                (Some(_), None) => false,
            }
    }

    /// The instants it starts or ends at, in `[from, until)` order: what a board's served
    /// ranking changes at.
    pub fn boundaries(&self) -> impl Iterator<Item = i64> {
        std::iter::once(self.active_from_us).chain(self.active_until_us)
    }

    /// Its id and revision, as a served board notes the controls it was served under.
    pub fn stamp(&self) -> (String, u64) {
        (self.id.clone(), self.revision)
    }

    /// The products it names.
    pub fn products(&self) -> &[i64] {
        match &self.action {
            Action::Pin { product_id, .. } => std::slice::from_ref(product_id),
            Action::Boost { product_ids, .. } | Action::Exclude { product_ids } => product_ids,
        }
    }
}

/// A field a control may not hold as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The field, as the API names it within a `Control` (`pin.position`).
    pub field: &'static str,
    pub reason: String,
}

fn refuse(field: &'static str, reason: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal { field, reason: reason.into() })
}

/// Why a control id is refused; `None` when it is valid: `[a-z0-9][a-z0-9_.-]{0,63}`.
pub fn id_problem(id: &str) -> Option<String> {
    name_problem(id, MAX_ID_LEN, b"_.-")
}

/// Checks what a caller may set: the id, the schedule, the note and the action's bounds.
/// The segment is checked where it is parsed.
pub fn validate(control: &Control) -> Result<(), Refusal> {
    if let Some(problem) = id_problem(&control.id) {
        return refuse("control_id", problem);
    }
    if let Some(name) = &control.profile
        && let Some(problem) = segment_problem(name)
    {
        return refuse("profile", problem);
    }
    if let Some(until) = control.active_until_us
        && until <= control.active_from_us
    {
        return refuse("active_until", "must be later than active_from");
    }
    let note = control.note.chars().count();
    if note > MAX_NOTE_CHARS {
        return refuse("note", format!("must be at most {MAX_NOTE_CHARS} characters, got {note}"));
    }
    match &control.action {
        Action::Pin { product_id, position } => {
            if *product_id <= 0 {
                return refuse("pin.product_id", "must be positive");
            }
            if !(1..=MAX_POSITION).contains(position) {
                return refuse("pin.position", format!("must be 1-{MAX_POSITION}, got {position}"));
            }
        }
        Action::Boost { product_ids, points } => {
            products("boost.product_ids", product_ids, MAX_BOOST_PRODUCTS)?;
            if !points.is_finite() || *points == 0.0 || points.abs() > MAX_POINTS {
                return refuse("boost.points", format!("must be non-zero and at most {MAX_POINTS} either way"));
            }
        }
        Action::Exclude { product_ids } => products("exclude.product_ids", product_ids, MAX_EXCLUDED_PRODUCTS)?,
    }
    Ok(())
}

fn products(field: &'static str, ids: &[i64], most: usize) -> Result<(), Refusal> {
    if ids.is_empty() || ids.len() > most {
        return refuse(field, format!("must hold 1-{most} products, got {}", ids.len()));
    }
    if let Some(bad) = ids.iter().find(|id| **id <= 0) {
        return refuse(field, format!("product ids must be positive, got {bad}"));
    }
    Ok(())
}

/// A bound a put would pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// The bound, in words (the caller's error names it).
    pub bound: String,
}

/// What the bounds of a put read of a stored control: its board, schedule and kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled {
    pub id: String,
    pub segment: Option<Segment>,
    pub windows: Windows,
    pub profile: Option<String>,
    pub active_from_us: i64,
    pub active_until_us: Option<i64>,
    pub pin: bool,
}

impl Scheduled {
    /// Whether it and `other` may act on one board in `window` (the same segment, the window
    /// and a profile in common).
    fn meets(&self, other: &Scheduled, window: Window) -> bool {
        self.segment == other.segment
            && self.windows.holds(window)
            && other.windows.holds(window)
            && match (&self.profile, &other.profile) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

impl Control {
    /// Its board, schedule and kind.
    pub fn scheduled(&self) -> Scheduled {
        Scheduled {
            id: self.id.clone(),
            segment: self.segment,
            windows: self.windows,
            profile: self.profile.clone(),
            active_from_us: self.active_from_us,
            active_until_us: self.active_until_us,
            pin: matches!(self.action, Action::Pin { .. }),
        }
    }
}

/// Whether storing `control` next to `stored` (which may hold an earlier version of it,
/// replaced) passes a bound: [`MAX_STORED`] controls, or, at any instant of its schedule on a
/// board it acts on, [`MAX_ACTIVE_PER_BOARD`] active controls or [`MAX_PINS_PER_BOARD`] pins.
pub fn exceeded(stored: &[Scheduled], control: &Scheduled) -> Option<Exceeded> {
    let others: Vec<&Scheduled> = stored.iter().filter(|c| c.id != control.id).collect();
    if others.len() + 1 > MAX_STORED {
        return Some(Exceeded { bound: format!("at most {MAX_STORED} stored controls") });
    }
    // Each window apart: a daily-only and a weekly-only control never meet on one board.
    for window in Window::ALL.into_iter().filter(|w| w.is_versioned()) {
        let sharing: Vec<&Scheduled> = others.iter().copied().filter(|c| c.meets(control, window)).collect();
        if control.windows.holds(window) && most_at_once(&sharing, control) + 1 > MAX_ACTIVE_PER_BOARD {
            return Some(Exceeded { bound: format!("at most {MAX_ACTIVE_PER_BOARD} active controls per board") });
        }
        let pins: Vec<&Scheduled> = sharing.into_iter().filter(|c| c.pin).collect();
        if control.pin && control.windows.holds(window) && most_at_once(&pins, control) + 1 > MAX_PINS_PER_BOARD {
            return Some(Exceeded { bound: format!("at most {MAX_PINS_PER_BOARD} active pins per board") });
        }
    }
    None
}

/// The most of `others` active at one instant of `control`'s schedule.
fn most_at_once(others: &[&Scheduled], control: &Scheduled) -> usize {
    let (from, until) = (control.active_from_us, control.active_until_us.unwrap_or(i64::MAX));
    // Each schedule clipped to the control's, as +1 at its start and -1 at its end; at one
    // instant ends come first (a schedule ends before the next one starts).
    let mut changes: Vec<(i64, i32)> = Vec::new();
    for c in others {
        let (start, end) = (c.active_from_us.max(from), c.active_until_us.unwrap_or(i64::MAX).min(until));
        if start < end {
            changes.push((start, 1));
            changes.push((end, -1));
        }
    }
    changes.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, change) in changes {
        now += change;
        most = most.max(now);
    }
    most as usize
}

#[cfg(test)]
mod tests;
