//! Sticky experiments: every shopper (an `actor_id`) hashed into one of 10,000 buckets, and
//! the variants of an experiment taking consecutive ranges of them in the order listed.
//!
//! The bucket depends on the experiment's name and the actor alone (FNV-1a, 32 bits, of
//! `name + ":" + actor_id`), so the same shopper gets the same variant on every replica and
//! after every restart, and raising one variant's share moves only the buckets between its
//! old and its new bound: nobody else changes variant. Renaming the experiment reshuffles
//! everyone, which is how a new experiment starts clean.

/// Buckets an experiment splits its shoppers into.
pub const BUCKETS: u32 = 10_000;

/// FNV-1a of `bytes`, 32 bits (offset basis 2166136261, prime 16777619).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(2_166_136_261u32, |hash, b| (hash ^ u32::from(*b)).wrapping_mul(16_777_619))
}

/// The bucket of `actor_id` in experiment `name`: 0 … 9,999.
pub fn bucket(name: &str, actor_id: &str) -> u32 {
    let mut key = Vec::with_capacity(name.len() + 1 + actor_id.len());
    key.extend_from_slice(name.as_bytes());
    key.push(b':');
    key.extend_from_slice(actor_id.as_bytes());
    fnv1a32(&key) % BUCKETS
}

/// An experiment: its name and its variants (profile names), each with its share of the
/// buckets, in the order listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Experiment {
    name: String,
    /// Each variant and the end (exclusive) of its bucket range; the last ends at
    /// [`BUCKETS`].
    variants: Vec<(String, u32)>,
}

impl Experiment {
    /// The experiment `name:variant=share,…`: shares in percent (summing to 100), or in basis
    /// points when they sum to 10,000. A refusal says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, list) = text.split_once(':').ok_or("expected name:variant=share,…")?;
        let name = name.trim();
        if name.is_empty() {
            return Err("the experiment's name is empty".into());
        }
        let mut shares: Vec<(String, u32)> = Vec::new();
        for part in list.split(',') {
            let (variant, share) =
                part.split_once('=').ok_or_else(|| format!("`{}`: expected variant=share", part.trim()))?;
            let variant = variant.trim();
            if variant.is_empty() {
                return Err(format!("`{}`: the variant's name is empty", part.trim()));
            }
            if shares.iter().any(|(v, _)| v == variant) {
                return Err(format!("variant `{variant}` is listed twice"));
            }
            let share: u32 = share
                .trim()
                .parse()
                .map_err(|_| format!("`{variant}`: share `{}` is not a whole number", share.trim()))?;
            shares.push((variant.to_string(), share));
        }
        let total: u64 = shares.iter().map(|(_, s)| u64::from(*s)).sum();
        let scale = match total {
            100 => 100,
            10_000 => 1,
            other => {
                return Err(format!(
                    "the shares sum to {other}: they must sum to 100 (percent) or 10000 (basis points)"
                ));
            }
        };
        let mut end = 0;
        let variants = shares
            .into_iter()
            .map(|(variant, share)| {
                end += share * scale;
                (variant, end)
            })
            .collect();
        Ok(Self { name: name.to_string(), variants })
    }

    /// The experiment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The variants' names, in the order listed.
    pub fn variants(&self) -> impl Iterator<Item = &str> {
        self.variants.iter().map(|(v, _)| v.as_str())
    }

    /// The variant `actor_id` is served.
    pub fn variant_of(&self, actor_id: &str) -> &str {
        let bucket = bucket(&self.name, actor_id);
        // The shares sum to BUCKETS, so some range holds every bucket.
        let at = self.variants.partition_point(|(_, end)| *end <= bucket);
        self.variants.get(at).or(self.variants.last()).map_or("", |(v, _)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a32_matches_the_published_vectors() {
        // From the FNV reference test suite (Landon Curt Noll's fnv_test.c).
        assert_eq!(fnv1a32(b""), 0x811c_9dc5);
        assert_eq!(fnv1a32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a32(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn a_bucket_is_the_hash_of_name_colon_actor_mod_10000() {
        assert_eq!(bucket("foo", "bar"), fnv1a32(b"foo:bar") % 10_000);
        assert!((0..1000).all(|i| bucket("x", &format!("actor-{i}")) < BUCKETS));
    }

    #[test]
    fn shares_in_percent_and_in_basis_points_take_consecutive_ranges() {
        let percent = Experiment::parse("rank-test:default=90,cart=10").expect("valid");
        let points = Experiment::parse("rank-test:default=9000,cart=1000").expect("valid");
        assert_eq!(percent, points);
        assert_eq!(percent.variants().collect::<Vec<_>>(), ["default", "cart"]);
        for i in 0..2000 {
            let actor = format!("shopper-{i}");
            let want = if bucket("rank-test", &actor) < 9000 { "default" } else { "cart" };
            assert_eq!(percent.variant_of(&actor), want, "{actor}");
        }
    }

    #[test]
    fn raising_a_share_moves_only_the_buckets_between_the_bounds() {
        let before = Experiment::parse("e:a=80,b=10,c=10").expect("valid");
        let after = Experiment::parse("e:a=70,b=20,c=10").expect("valid");
        let mut moved = 0;
        for i in 0..20_000 {
            let actor = format!("u{i}");
            let b = bucket("e", &actor);
            let (was, is) = (before.variant_of(&actor), after.variant_of(&actor));
            if (7000..8000).contains(&b) {
                assert_eq!((was, is), ("a", "b"), "{actor} in bucket {b}");
                moved += 1;
            } else {
                assert_eq!(was, is, "{actor} in bucket {b} stays");
            }
        }
        // About a tenth of the actors, as the hash spreads them.
        assert!((1_500..2_500).contains(&moved), "{moved}");
    }

    #[test]
    fn malformed_experiments_say_what_is_wrong() {
        for (text, why) in [
            ("nocolon", "expected name:variant=share"),
            (":a=100", "name is empty"),
            ("e:a=50,b=40", "sum to 90"),
            ("e:a=50,a=50", "listed twice"),
            ("e:a=x", "not a whole number"),
            ("e:=100", "variant's name is empty"),
            ("e:a", "expected variant=share"),
        ] {
            let error = Experiment::parse(text).expect_err(text);
            assert!(error.contains(why), "{text}: {error}");
        }
    }
}
