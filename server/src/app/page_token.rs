//! Page tokens: where the next page of a GetTopN starts, in which version.
//!
//! A token names the ranking (window, day, hour), the version the first page came from, the
//! next offset and the page size, so every page of a walk comes from one version even while
//! the ranking is recomputed. Hourly rankings have no versions: their tokens carry the
//! position only (version 0).
//!
//! The encoding is 27 bytes (and, for a segment ranking, its name after a length byte) and
//! an 8-byte tag (SHA-256 of a fixed context and the bytes),
//! base64url without padding. The tag makes a garbled or edited token fail to decode
//! (INVALID_ARGUMENT) instead of naming another page; it is not a secret, and a token only
//! ever names a position a caller could ask for with `offset`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{Datelike, NaiveDate};
use sha2::{Digest, Sha256};

use super::invalid::{Invalid, quote};
use crate::domain::calendar::RankingHour;
use crate::domain::catalog::{MAX_SEGMENT_LEN, Segment};
use crate::ports::RankingKey;

const FORMAT: u8 = 1;
/// The format of a token of a segment ranking: the name follows the fixed part.
const SEGMENT_FORMAT: u8 = 2;
const PAYLOAD: usize = 27;
const TAG: usize = 8;
/// A longer token cannot be one of ours; it is refused before decoding.
const MAX_TEXT: usize = (PAYLOAD + 1 + MAX_SEGMENT_LEN + TAG).div_ceil(3) * 4;

/// The position of the next page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageToken {
    /// The ranking.
    pub key: RankingKey,
    /// The version every page comes from (0 for hourly rankings).
    pub version: u64,
    /// Entries before the next page.
    pub offset: u64,
    /// The page size of the walk.
    pub limit: u32,
}

fn tag(payload: &[u8]) -> [u8; TAG] {
    let digest = Sha256::new().chain_update(b"ranking.v1 page token\0").chain_update(payload).finalize();
    let mut tag = [0; TAG];
    tag.copy_from_slice(&digest[..TAG]);
    tag
}

fn garbled(text: &str) -> Invalid {
    Invalid::field("page_token", format!("{} is not a page token of this service", quote(text)))
}

impl PageToken {
    /// The token text.
    pub fn encode(&self) -> String {
        let mut bytes = Vec::with_capacity(PAYLOAD + TAG);
        let (window, date, hour) = match self.key {
            RankingKey::Daily(d) => (1u8, d, u8::MAX),
            RankingKey::Hourly(h) => (2u8, h.date, h.hour as u8),
            RankingKey::Weekly(d) | RankingKey::WeeklySegment(d, _) => (3u8, d, u8::MAX),
            RankingKey::DailySegment(d, _) => (1u8, d, u8::MAX),
            RankingKey::Trending(d) | RankingKey::TrendingSegment(d, _) => (4u8, d, u8::MAX),
        };
        let segment = self.key.segment();
        bytes.push(if segment.is_some() { SEGMENT_FORMAT } else { FORMAT });
        bytes.push(window);
        bytes.extend_from_slice(&date.num_days_from_ce().to_be_bytes());
        bytes.push(hour);
        bytes.extend_from_slice(&self.version.to_be_bytes());
        bytes.extend_from_slice(&self.offset.to_be_bytes());
        bytes.extend_from_slice(&self.limit.to_be_bytes());
        if let Some(segment) = segment {
            bytes.push(segment.as_str().len() as u8);
            bytes.extend_from_slice(segment.as_str().as_bytes());
        }
        let tag = tag(&bytes);
        bytes.extend_from_slice(&tag);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The token a text encodes; INVALID_ARGUMENT naming `page_token` when it is not one.
    pub fn decode(text: &str) -> Result<Self, Invalid> {
        if text.len() > MAX_TEXT {
            return Err(garbled(text));
        }
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| garbled(text))?;
        let payload = match bytes.first() {
            Some(&FORMAT) => PAYLOAD,
            Some(&SEGMENT_FORMAT) if bytes.len() > PAYLOAD => PAYLOAD + 1 + usize::from(bytes[PAYLOAD]),
            _ => return Err(garbled(text)),
        };
        if bytes.len() != payload + TAG || bytes[payload..] != tag(&bytes[..payload]) {
            return Err(garbled(text));
        }
        let segment = match payload > PAYLOAD {
            true => {
                let name = std::str::from_utf8(&bytes[PAYLOAD + 1..payload]).map_err(|_| garbled(text))?;
                Some(Segment::parse(name).map_err(|_| garbled(text))?)
            }
            false => None,
        };
        let u32_at = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_be_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        let date = NaiveDate::from_num_days_from_ce_opt(u32_at(2) as i32).ok_or_else(|| garbled(text))?;
        let key = match (bytes[1], bytes[6]) {
            (1, u8::MAX) => RankingKey::Daily(date),
            (2, hour @ 0..=23) => RankingKey::Hourly(RankingHour { date, hour: u32::from(hour) }),
            (3, u8::MAX) => RankingKey::Weekly(date),
            (4, u8::MAX) => RankingKey::Trending(date),
            _ => return Err(garbled(text)),
        };
        let key = key.restricted(segment).ok_or_else(|| garbled(text))?;
        Ok(Self { key, version: u64_at(7), offset: u64_at(15), limit: u32_at(23) })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::app::invalid::PathSegment;

    fn daily() -> PageToken {
        PageToken {
            key: RankingKey::Daily(NaiveDate::from_ymd_opt(2026, 12, 1).expect("date")),
            version: 1_764_550_000_123,
            offset: 40,
            limit: 20,
        }
    }

    #[test]
    fn tokens_round_trip() {
        let t = daily();
        assert_eq!(PageToken::decode(&t.encode()).expect("decodes"), t);
        let hourly = PageToken {
            key: RankingKey::Hourly(RankingHour {
                date: NaiveDate::from_ymd_opt(2026, 12, 1).expect("date"),
                hour: 23,
            }),
            version: 0,
            offset: u64::MAX,
            limit: 1_000,
        };
        assert_eq!(PageToken::decode(&hourly.encode()).expect("decodes"), hourly);
        assert!(t.encode().len() <= MAX_TEXT);
    }

    #[test]
    fn garbled_or_edited_tokens_are_invalid_arguments() {
        let text = daily().encode();
        for bad in [String::new(), "x".into(), text[1..].to_string(), format!("{text}A"), "é".repeat(10_000)] {
            let e = PageToken::decode(&bad).expect_err("refused");
            assert_eq!(e.path.0, vec![PathSegment::Field("page_token")], "{bad:?}");
            assert!(e.reason.len() < 200);
        }
        // Moving the offset of a real token without its tag.
        let mut bytes = URL_SAFE_NO_PAD.decode(&text).expect("base64");
        bytes[22] ^= 1;
        assert!(PageToken::decode(&URL_SAFE_NO_PAD.encode(bytes)).is_err());
    }

    proptest! {
        #[test]
        fn every_single_character_change_is_refused_or_harmless(i in 0usize..47, c in proptest::char::range('-', 'z')) {
            let text = daily().encode();
            let mut edited: Vec<char> = text.chars().collect();
            prop_assume!(i < edited.len() && edited[i] != c);
            edited[i] = c;
            let edited: String = edited.into_iter().collect();
            // Base64 without padding may ignore the low bits of the last character.
            if let Ok(t) = PageToken::decode(&edited) {
                prop_assert_eq!(t, daily());
            }
        }
    }
}
