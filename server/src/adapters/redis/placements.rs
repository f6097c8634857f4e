//! Several products' places in one ranking: `scripts/packed_placements.lua` in a version of
//! a versioned ranking (its packed copy and product index), `scripts/placements.lua` in an
//! hourly ranking (a ZSET).
//! Both answer `{version or false, entries, then per product: index, score, entries with a
//! greater score (or three falses)}`, parsed by one function; only the score's form differs.

use redis::Value;

use super::keys::{member, parse_version};
use super::{RedisRankingStore, unavailable};
use crate::ports::{Found, Placements, RankingKey, StoreError};

impl RedisRankingStore {
    /// [`crate::ports::RankingStore::placements`].
    pub(super) async fn find(
        &self,
        key: RankingKey,
        version: Option<u64>,
        product_ids: &[i64],
    ) -> Result<Placements, StoreError> {
        let versioned = key.is_versioned();
        let raw: Vec<Value> = if versioned {
            let mut invocation = self.scripts.packed_placements.key(self.keys.pointer(key));
            invocation.arg(self.keys.versions(key));
            match version {
                Some(v) => invocation.arg(v),
                None => invocation.arg("current"),
            };
            // The script compares the packed copy's 8-byte ids.
            for id in product_ids {
                invocation.arg(id.to_be_bytes().as_slice());
            }
            match invocation.invoke_async(&mut self.conn.clone()).await {
                Err(e) => match super::chains::delta_refusal(&e) {
                    Some(delta) => return self.chained_placements(key, delta, product_ids).await,
                    None => Err(e),
                },
                read => read,
            }
        } else {
            let mut invocation = self.scripts.placements.key(self.keys.base(key));
            for id in product_ids {
                invocation.arg(member(*id));
            }
            invocation.invoke_async(&mut self.conn.clone()).await
        }
        .map_err(unavailable)?;
        let score = if versioned { score_bits } else { score_text };
        parse(&raw, product_ids.len(), versioned, score)
            .ok_or_else(|| StoreError::Corrupt(format!("unexpected reply to a placements script for {key:?}")))
    }
}

impl RedisRankingStore {
    /// The places of `ids` in a delta version a script refused to read, from the version
    /// built whole; none when it is no longer kept.
    async fn chained_placements(&self, key: RankingKey, version: u64, ids: &[i64]) -> Result<Placements, StoreError> {
        match self.chained(key, version, None).await? {
            Some(copy) => Ok(Placements::in_snapshot(&copy, version, ids)),
            None => Ok(Placements { found: vec![None; ids.len()], total: 0, version: None }),
        }
    }
}

/// A ZSET score as `ZSCORE` answers it.
fn score_text(v: &Value) -> Option<f64> {
    redis::from_redis_value_ref::<String>(v).ok()?.parse().ok()
}

/// A packed entry's score bits.
fn score_bits(v: &Value) -> Option<f64> {
    let Value::BulkString(bits) = v else { return None };
    Some(f64::from_bits(u64::from_be_bytes(bits.as_slice().try_into().ok()?)))
}

/// The placements of `ids` products in a script's reply; `None` when it is not one.
fn parse(raw: &[Value], ids: usize, versioned: bool, score: fn(&Value) -> Option<f64>) -> Option<Placements> {
    let number = |v: &Value| -> Option<Option<u64>> {
        match v {
            Value::Nil => Some(None),
            other => redis::from_redis_value_ref::<u64>(other).ok().map(Some),
        }
    };
    let version = match raw.first()? {
        Value::Nil => None,
        v => parse_version(Some(redis::from_redis_value_ref::<String>(v).ok()?)).ok()?,
    };
    if version.is_none() && versioned {
        return Some(Placements { found: vec![None; ids], total: 0, version: None });
    }
    let total = number(raw.get(1)?)?.unwrap_or(0);
    let mut found = Vec::with_capacity(ids);
    for triple in raw.get(2..)?.chunks(3) {
        let [index, score_of, above] = triple else { return None };
        found.push(match (number(index)?, number(above)?) {
            (Some(index), Some(above)) => Some(Found { index, score: score(score_of)?, above }),
            _ => None,
        });
    }
    (found.len() == ids).then_some(Placements { found, total, version })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn both_reply_forms_parse_alike() {
        let zset =
            [bulk("17"), Value::Int(3), Value::Int(0), bulk("5.5"), Value::Int(0), Value::Nil, Value::Nil, Value::Nil];
        let packed = [
            bulk("17"),
            Value::Int(3),
            Value::Int(0),
            Value::BulkString(5.5f64.to_bits().to_be_bytes().to_vec()),
            Value::Int(0),
            Value::Nil,
            Value::Nil,
            Value::Nil,
        ];
        let expected = Placements {
            found: vec![Some(Found { index: 0, score: 5.5, above: 0 }), None],
            total: 3,
            version: Some(17),
        };
        assert_eq!(parse(&zset, 2, true, score_text), Some(expected.clone()));
        assert_eq!(parse(&packed, 2, true, score_bits), Some(expected));
        assert_eq!(parse(&zset, 3, true, score_text), None, "a product short");
        let none = parse(&[Value::Nil, Value::Int(0)], 2, true, score_text).expect("no version");
        assert_eq!((none.version, none.found), (None, vec![None, None]));
        let hourly =
            parse(&[Value::Nil, Value::Int(4), Value::Int(1), bulk("0.3"), Value::Int(1)], 1, false, score_text);
        assert_eq!(hourly.map(|p| (p.version, p.total)), Some((None, 4)));
    }
}
