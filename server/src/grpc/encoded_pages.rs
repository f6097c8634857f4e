//! GetTopN answers on the wire, encoded once per answer the read side keeps: the hot pages of
//! held copies are answered to thousands of callers between two versions, each a copy of
//! the same bytes instead of a new encoding.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use prost::Message;
use ranking_proto::Encoded;
use ranking_proto::v1 as pb;

use super::convert::top_response;
use crate::app::queries::TopAnswer;

/// Most encodings kept: as many as the read side keeps answers, and a few it let go.
const MAX_ENCODED: usize = 2_048;

/// Encodings of answers, by the answer's allocation. Each holds a [`Weak`] of its answer, so
/// that the allocation (and so its address) is never reused while its entry lives, and an
/// answer the read side dropped is recognised and its entry freed.
#[derive(Default)]
pub struct EncodedPages(Mutex<HashMap<usize, (Weak<TopAnswer>, Bytes)>>);

impl EncodedPages {
    /// `answer` on the wire: its kept encoding, or a new one kept for the next caller.
    pub fn encode(&self, answer: &Arc<TopAnswer>) -> Encoded<pb::GetTopNResponse> {
        let at = Arc::as_ptr(answer) as usize;
        if let Some((_, bytes)) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&at) {
            return Encoded::from_encoding(bytes.clone());
        }
        let bytes: Bytes = top_response(answer).encode_to_vec().into();
        // An answer only this call holds is never asked again: not worth keeping.
        if Arc::strong_count(answer) > 1 {
            let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() >= MAX_ENCODED {
                kept.retain(|_, (answer, _)| answer.strong_count() > 0);
                if kept.len() >= MAX_ENCODED {
                    kept.clear();
                }
            }
            kept.insert(at, (Arc::downgrade(answer), bytes.clone()));
        }
        Encoded::from_encoding(bytes)
    }

    /// Encodings kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(total: u64) -> Arc<TopAnswer> {
        let date = "2026-12-01".parse().expect("date");
        Arc::new(TopAnswer { entries: Vec::new(), total, date, version: Some(7), next_page_token: None })
    }

    #[test]
    fn a_kept_answer_is_encoded_once_and_a_dropped_one_is_let_go() {
        let pages = EncodedPages::default();
        let kept = answer(3);
        let held_elsewhere = kept.clone();
        let first = pages.encode(&kept);
        assert_eq!(pages.len(), 1);
        assert_eq!(pages.encode(&kept).bytes(), first.bytes());
        assert_eq!(pages.len(), 1, "the second call copied the kept bytes");
        // An answer nobody else holds is not kept.
        pages.encode(&answer(4));
        assert_eq!(pages.len(), 1);
        drop((kept, held_elsewhere));
        for n in 0..MAX_ENCODED as u64 {
            let a = answer(n);
            let _other = a.clone();
            pages.encode(&a);
        }
        assert!(pages.len() <= MAX_ENCODED, "bounded: {}", pages.len());
    }
}
