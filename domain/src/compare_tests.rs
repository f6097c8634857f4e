//! The comparison against figures computed apart: RBO from its formula over prefix sets, and
//! the weighted tau by `scipy.stats.weightedtau` 1.17.1 (defaults), on fixed tops.

use super::*;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-12, "{a} against {b}");
}

/// Two tops, the depth and p, and the figures expected: (rbo_ext, rbo_min, weightedtau).
type Case<'a> = (&'a [i64], &'a [i64], usize, f64, (f64, f64, f64));

#[test]
fn figures_equal_those_computed_apart_for_overlapping_and_unequal_tops() {
    let cases: [Case; 3] = [
        (
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
            &[3, 1, 2, 5, 4, 13, 6, 7, 14, 8, 15, 9],
            10,
            0.9,
            (0.7263127386642858, 0.6107810960621676, 0.7117514725588385),
        ),
        (
            &[1, 2, 3, 4, 5, 6, 7, 8],
            &[8, 7, 6, 5, 4, 3, 2, 1, 9, 10, 11, 12],
            100,
            0.9,
            (0.5894589857142858, 0.3916602763121674, -0.9999999999999998),
        ),
        (
            &[5, 4, 3, 2, 1, 6, 7, 8, 9, 10],
            &[1, 2, 3, 4, 5, 11, 12, 13, 14, 15],
            10,
            0.5,
            (0.1428958953373016, 0.14281923613306002, 0.3086805512986688),
        ),
    ];
    for (a, b, depth, p, (ext, min, tau)) in cases {
        let c = compare(a, b, depth, p);
        close(c.rbo_ext, ext);
        close(c.rbo_min, min);
        close(c.weighted_tau, tau);
    }
}

#[test]
fn a_top_compared_with_itself_is_one_and_one() {
    let top: Vec<i64> = (1..=50).collect();
    let c = compare(&top, &top, 50, 0.9);
    assert_eq!((c.rbo_ext, c.weighted_tau, c.overlap_at_10, c.overlap_at_100), (1.0, 1.0, 1.0, 0.5));
    assert!(c.largest_shifts.iter().all(|s| s.rank_a == s.rank_b));
    assert_eq!(compare(&[7], &[7], 10, 0.9).weighted_tau, 1.0);
}

#[test]
fn shifts_come_largest_first_then_by_the_better_rank_in_a_and_missing_is_zero() {
    let a = [1, 2, 3, 4, 5];
    let b = [5, 2, 3, 4, 9];
    let c = compare(&a, &b, 5, 0.9);
    let shifts: Vec<(i64, u64, u64)> = c.largest_shifts.iter().map(|s| (s.product_id, s.rank_a, s.rank_b)).collect();
    // 1 and 9 are missing from one top (rank 6 there): |1 − 6| = 5, |6 − 5| = 1; 5 moved 4.
    assert_eq!(shifts, vec![(1, 1, 0), (5, 5, 1), (9, 0, 5), (2, 2, 2), (3, 3, 3), (4, 4, 4)]);
    assert_eq!(c.overlap_at_10, 0.4);
}
