//! A version's statistics as the store keeps them beside it (`v<N>:stats`, JSON): each
//! axis's mean and standard deviation as their IEEE bits (so they read back bit for bit) and
//! the population, the recency clock, the profile's fingerprint and when it was computed.

use serde::{Deserialize, Serialize};

use crate::domain::normalize::AxisStats;
use crate::domain::ranking::PopulationStats;
use crate::ports::{RecencyClock, StoreError, VersionStats};

#[derive(Serialize, Deserialize)]
struct Stored {
    /// Per axis: mean bits, standard deviation bits, population.
    axes: Vec<(u64, u64, u64)>,
    day_start_us: i64,
    reference_us: i64,
    profile: String,
    computed_at_us: i64,
}

/// `stats` as `v<N>:stats` holds them.
pub(super) fn encode(stats: &VersionStats) -> Vec<u8> {
    let stored = Stored {
        axes: stats.stats.axes.iter().map(|a| (a.mean.to_bits(), a.std.to_bits(), a.count as u64)).collect(),
        day_start_us: stats.clock.day_start_us,
        reference_us: stats.clock.reference_us,
        profile: stats.profile.clone(),
        computed_at_us: stats.computed_at_us,
    };
    serde_json::to_vec(&stored).expect("statistics serialize")
}

/// The statistics `v<N>:stats` holds.
pub(super) fn decode(bytes: &[u8]) -> Result<VersionStats, StoreError> {
    let stored: Stored =
        serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt(format!("a version's statistics: {e}")))?;
    let axes = stored
        .axes
        .iter()
        .map(|(mean, std, count)| {
            let count = usize::try_from(*count).map_err(|_| StoreError::Corrupt("a population too large".into()))?;
            Ok(AxisStats { mean: f64::from_bits(*mean), std: f64::from_bits(*std), count })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(VersionStats {
        stats: PopulationStats { axes },
        clock: RecencyClock { day_start_us: stored.day_start_us, reference_us: stored.reference_us },
        profile: stored.profile,
        computed_at_us: stored.computed_at_us,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_read_back_bit_for_bit() {
        let stats = VersionStats {
            stats: PopulationStats {
                axes: vec![
                    AxisStats { mean: 0.1 + 0.2, std: f64::MIN_POSITIVE / 3.0, count: 1_000_001 },
                    AxisStats { mean: -0.0, std: 1e300, count: 0 },
                ],
            },
            clock: RecencyClock { day_start_us: -5, reference_us: 86_400_000_000 },
            profile: "a\"b\\c".into(),
            computed_at_us: 1_765_000_000_000_000,
        };
        let back = decode(&encode(&stats)).expect("decoded");
        let bits =
            |s: &VersionStats| s.stats.axes.iter().map(|a| (a.mean.to_bits(), a.std.to_bits())).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&stats));
        assert_eq!(back, stats);
        assert!(decode(b"{").is_err());
    }
}
