//! Rank history: the top of each ended day's final served board, kept per board and day, and
//! what a product's days add up to (its rank each day, its best rank, days in the top 10 and
//! 100, its streak, the days restated after they ended).
//!
//! A kept day is its top packed in served rank order, 20 bytes per entry: the product id
//! (8 bytes), its organic rank (4; 0 when a control placed it without an organic entry) and
//! its served main score's integer part (8), big-endian. Its rank is its place. A product's
//! day is found by a scan of the day's top: at most a thousand entries, and a history holds
//! at most a few hundred days.

use chrono::{Days, NaiveDate};

/// Bytes of one kept entry.
pub const ENTRY_BYTES: usize = 20;

/// One entry of a kept top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptEntry {
    pub product_id: i64,
    /// Rank before merchandising controls; 0: not ranked organically.
    pub organic_rank: u32,
    /// The served main score's integer part.
    pub main_floor: i64,
}

/// `entries` (in served rank order) packed as a day is kept.
pub fn pack(entries: &[KeptEntry]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(entries.len() * ENTRY_BYTES);
    for e in entries {
        bytes.extend_from_slice(&e.product_id.to_be_bytes());
        bytes.extend_from_slice(&e.organic_rank.to_be_bytes());
        bytes.extend_from_slice(&e.main_floor.to_be_bytes());
    }
    bytes
}

/// The entries of a packed top; `None` when its length is not a whole number of entries.
pub fn unpack(bytes: &[u8]) -> Option<Vec<KeptEntry>> {
    if !bytes.len().is_multiple_of(ENTRY_BYTES) {
        return None;
    }
    Some(bytes.chunks_exact(ENTRY_BYTES).map(entry).collect())
}

fn entry(chunk: &[u8]) -> KeptEntry {
    let (id, rest) = chunk.split_at(8);
    let (organic, main) = rest.split_at(4);
    KeptEntry {
        product_id: i64::from_be_bytes(id.try_into().expect("8 bytes")),
        organic_rank: u32::from_be_bytes(organic.try_into().expect("4 bytes")),
        main_floor: i64::from_be_bytes(main.try_into().expect("8 bytes")),
    }
}

/// One kept day of a board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptDay {
    pub date: NaiveDate,
    /// Its top, packed ([`pack`]).
    pub top: Vec<u8>,
    /// Times its top changed after it was first kept.
    pub restated: u32,
}

impl KeptDay {
    /// `product_id`'s rank (1-based) and entry on this day, when it is in the kept top.
    pub fn place(&self, product_id: i64) -> Option<(u64, KeptEntry)> {
        let wanted = product_id.to_be_bytes();
        self.top
            .chunks_exact(ENTRY_BYTES)
            .position(|chunk| chunk[..8] == wanted)
            .map(|i| (i as u64 + 1, entry(&self.top[i * ENTRY_BYTES..(i + 1) * ENTRY_BYTES])))
    }
}

/// A product's place on one day of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DayRank {
    pub date: NaiveDate,
    /// Served rank; 0: not in the kept top (or the day was not kept).
    pub rank: u64,
    pub organic_rank: u64,
    pub main_floor: i64,
}

/// A product's history over a range, and its best over all the kept days.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// Every day of the range, oldest first.
    pub days: Vec<DayRank>,
    /// The best rank over every kept day, and the last day it was reached.
    pub best: Option<(u64, NaiveDate)>,
    pub days_in_top_10: u32,
    pub days_in_top_100: u32,
    /// Consecutive days in the top 100 up to the range's last day.
    pub streak_in_top_100: u32,
    /// Days of the range restated after they ended.
    pub restated_days: u32,
}

/// The history of `product_id` over `from..=to` from the board's kept days (every kept day
/// of the board, in any order: the best rank is over all of them).
pub fn summarize(product_id: i64, kept: &[KeptDay], from: NaiveDate, to: NaiveDate) -> Summary {
    let mut summary = Summary::default();
    for day in kept {
        if let Some((rank, _)) = day.place(product_id) {
            let better = match summary.best {
                None => true,
                Some((best, date)) => rank < best || (rank == best && day.date > date),
            };
            if better {
                summary.best = Some((rank, day.date));
            }
        }
    }
    let mut date = from;
    while date <= to {
        let kept_day = kept.iter().find(|d| d.date == date);
        let place = kept_day.and_then(|d| d.place(product_id));
        let (rank, organic_rank, main_floor) = match place {
            Some((rank, e)) => (rank, u64::from(e.organic_rank), e.main_floor),
            None => (0, 0, 0),
        };
        summary.days.push(DayRank { date, rank, organic_rank, main_floor });
        summary.days_in_top_10 += u32::from((1..=10).contains(&rank));
        summary.days_in_top_100 += u32::from((1..=100).contains(&rank));
        summary.restated_days += u32::from(kept_day.is_some_and(|d| d.restated > 0));
        let Some(next) = date.checked_add_days(Days::new(1)) else { break };
        date = next;
    }
    summary.streak_in_top_100 = summary.days.iter().rev().take_while(|d| (1..=100).contains(&d.rank)).count() as u32;
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, d).expect("a date")
    }

    fn kept(d: u32, products: &[i64], restated: u32) -> KeptDay {
        let entries: Vec<KeptEntry> = products
            .iter()
            .zip(1u32..)
            .map(|(&product_id, rank)| KeptEntry { product_id, organic_rank: rank, main_floor: 100 - i64::from(rank) })
            .collect();
        KeptDay { date: day(d), top: pack(&entries), restated }
    }

    #[test]
    fn a_packed_top_unpacks_to_itself_and_a_torn_one_is_refused() {
        let entries = vec![
            KeptEntry { product_id: -7, organic_rank: 0, main_floor: i64::MAX },
            KeptEntry { product_id: i64::MAX, organic_rank: u32::MAX, main_floor: 0 },
        ];
        let bytes = pack(&entries);
        assert_eq!(bytes.len(), 2 * ENTRY_BYTES);
        assert_eq!(unpack(&bytes), Some(entries));
        assert_eq!(unpack(&bytes[..ENTRY_BYTES + 3]), None);
    }

    #[test]
    fn the_summary_counts_ranks_streak_best_and_restated_days() {
        // Product 5: day 1 rank 3, day 2 not kept at all, day 3 rank 1, day 4 rank 2 (restated).
        let days = vec![
            kept(4, &[9, 5], 1),
            kept(1, &[1, 2, 5], 0),
            kept(3, &[5], 0),
            // Outside the range, without the product.
            kept(30, &[8, 7], 0),
        ];
        let s = summarize(5, &days, day(1), day(4));
        let ranks: Vec<u64> = s.days.iter().map(|d| d.rank).collect();
        assert_eq!(ranks, vec![3, 0, 1, 2]);
        assert_eq!(s.days[0].main_floor, 97);
        assert_eq!(s.best, Some((1, day(3))));
        assert_eq!((s.days_in_top_10, s.days_in_top_100, s.streak_in_top_100, s.restated_days), (3, 3, 2, 1));
    }

    #[test]
    fn the_best_rank_is_over_every_kept_day_and_its_last_date() {
        let days = vec![kept(1, &[5], 0), kept(20, &[5], 0), kept(10, &[1, 5], 0)];
        let s = summarize(5, &days, day(10), day(10));
        assert_eq!(s.best, Some((1, day(20))));
        assert_eq!(summarize(6, &days, day(1), day(2)).best, None);
        assert_eq!(summarize(6, &days, day(1), day(2)).streak_in_top_100, 0);
    }
}
