//! Two rankings compared: rank-biased overlap extrapolated and its lower bound (Webber, Moffat
//! & Zobel 2010) at persistence `p`, weighted Kendall's tau with the hyperbolic weigher
//! (Vigna 2015, as `scipy.stats.weightedtau(x, y)` computes it with its defaults), the overlap
//! of the top 10 and 100, and the products whose ranks differ most.
//!
//! Both tops are cut to one depth `k = min(depth, |a|, |b|)`; with `X_d` the products the two
//! first `d` entries share, `rbo_ext = X_k/k · p^k + (1−p)/p · Σ X_d/d · p^d` and
//! `rbo_min = (1−p)/p · (Σ (X_d − X_k) · p^d / d − X_k · ln(1 − p))`. The weighted tau is taken
//! over the union of the two cut tops, with `x = −rank in a`, `y = −rank in b`, a product
//! missing from a top taking rank `k + 1` there.

use std::collections::{HashMap, HashSet};

/// Most shifts reported.
pub const SHIFTS: usize = 20;

/// A product's rank in each top (0: not in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shift {
    pub product_id: i64,
    pub rank_a: u64,
    pub rank_b: u64,
}

/// What two tops have in common.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub rbo_ext: f64,
    pub rbo_min: f64,
    pub weighted_tau: f64,
    pub overlap_at_10: f64,
    pub overlap_at_100: f64,
    /// Up to [`SHIFTS`], largest |rank_a − rank_b| first (missing = k + 1), then the better
    /// rank in a.
    pub largest_shifts: Vec<Shift>,
}

/// Compares the tops `a` and `b` (product ids, best first) to `depth` at persistence `p`
/// (in (0, 1)).
pub fn compare(a: &[i64], b: &[i64], depth: usize, p: f64) -> Comparison {
    let k = depth.min(a.len()).min(b.len());
    let (a_k, b_k) = (&a[..k], &b[..k]);
    let (rbo_ext, rbo_min) = rbo(a_k, b_k, p);
    let rank_in = |top: &[i64]| -> HashMap<i64, u64> { top.iter().zip(1u64..).map(|(p, r)| (*p, r)).collect() };
    let (in_a, in_b) = (rank_in(a_k), rank_in(b_k));
    let mut union: Vec<i64> = a_k.to_vec();
    union.extend(b_k.iter().filter(|p| !in_a.contains_key(p)));
    let missing = k as u64 + 1;
    let ranks: Vec<(u64, u64)> = union
        .iter()
        .map(|p| (in_a.get(p).copied().unwrap_or(missing), in_b.get(p).copied().unwrap_or(missing)))
        .collect();
    let x: Vec<f64> = ranks.iter().map(|(ra, _)| -(*ra as f64)).collect();
    let y: Vec<f64> = ranks.iter().map(|(_, rb)| -(*rb as f64)).collect();
    let mut shifts: Vec<(u64, u64, i64)> = union.iter().zip(&ranks).map(|(p, (ra, rb))| (*ra, *rb, *p)).collect();
    shifts.sort_by_key(|(ra, rb, _)| (std::cmp::Reverse(ra.abs_diff(*rb)), *ra));
    let shown = |r: u64| if r == missing { 0 } else { r };
    Comparison {
        rbo_ext,
        rbo_min,
        weighted_tau: weighted_tau(&x, &y),
        overlap_at_10: overlap(a, b, 10),
        overlap_at_100: overlap(a, b, 100),
        largest_shifts: shifts
            .into_iter()
            .take(SHIFTS)
            .map(|(ra, rb, product_id)| Shift { product_id, rank_a: shown(ra), rank_b: shown(rb) })
            .collect(),
    }
}

/// `|A_n ∩ B_n| / n`.
fn overlap(a: &[i64], b: &[i64], n: usize) -> f64 {
    let a: HashSet<i64> = a.iter().take(n).copied().collect();
    b.iter().take(n).filter(|p| a.contains(p)).count() as f64 / n as f64
}

/// RBO_ext and RBO_min of two tops of one length `k` (both empty: identical, 1).
fn rbo(a: &[i64], b: &[i64], p: f64) -> (f64, f64) {
    let k = a.len();
    if k == 0 {
        return (1.0, 1.0);
    }
    // The same top: 1 exactly, where the sum of the formula lands a rounding short of it.
    let identical = a == b;
    let (mut seen_a, mut seen_b) = (HashSet::new(), HashSet::new());
    let mut x = Vec::with_capacity(k);
    let mut shared = 0usize;
    for d in 0..k {
        let (pa, pb) = (a[d], b[d]);
        if pa == pb {
            shared += 1;
        } else {
            shared += usize::from(seen_b.contains(&pa)) + usize::from(seen_a.contains(&pb));
        }
        seen_a.insert(pa);
        seen_b.insert(pb);
        x.push(shared as f64);
    }
    let x_k = x[k - 1];
    let (mut sum_ext, mut sum_min) = (0.0, 0.0);
    let mut p_d = 1.0;
    for (d, x_d) in (1..=k).zip(&x) {
        p_d *= p;
        sum_ext += x_d / d as f64 * p_d;
        sum_min += (x_d - x_k) * p_d / d as f64;
    }
    let ext = if identical { 1.0 } else { x_k / k as f64 * p_d + (1.0 - p) / p * sum_ext };
    let min = (1.0 - p) / p * (sum_min - x_k * (1.0 - p).ln());
    (ext, min)
}

/// Weighted tau of `x` and `y` with the additive hyperbolic weigher `1 / (r + 1)`, averaged
/// over the two orders of importance (by decreasing `x` then `y`, and by decreasing `y` then
/// `x`), ties counted as `scipy.stats.weightedtau` counts them. O(n²): the union of two tops
/// of at most a thousand entries each.
pub fn weighted_tau(x: &[f64], y: &[f64]) -> f64 {
    (one_way(x, y) + one_way(y, x)) / 2.0
}

fn one_way(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| x[j].total_cmp(&x[i]).then(y[j].total_cmp(&y[i])));
    let mut weight = vec![0.0; n];
    for (rank, &i) in order.iter().enumerate() {
        weight[i] = 1.0 / (rank as f64 + 1.0);
    }
    let (mut concordance, mut spread_x, mut spread_y) = (0.0, 0.0, 0.0);
    for i in 0..n {
        for j in i + 1..n {
            let w = weight[i] + weight[j];
            let sx = sign(x[i] - x[j]);
            let sy = sign(y[i] - y[j]);
            concordance += w * sx * sy;
            spread_x += w * sx.abs();
            spread_y += w * sy.abs();
        }
    }
    // Fewer than two entries ordered either way (a top of one): no pair to compare; the same
    // order is 1, as a longer top compared with itself.
    if spread_x == 0.0 || spread_y == 0.0 {
        return if x == y { 1.0 } else { 0.0 };
    }
    concordance / (spread_x * spread_y).sqrt()
}

fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
