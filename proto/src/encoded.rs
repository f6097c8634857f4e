//! A message sent as bytes encoded once, for answers that many callers read unchanged.

use std::fmt;
use std::marker::PhantomData;

use bytes::{Buf, BufMut, Bytes};
use prost::encoding::{DecodeContext, WireType, skip_field};
use prost::{DecodeError, Message};

/// The encoding of an `M`, sent as is: encoding it again for every caller would cost the
/// same work each time for the same bytes. Cloning shares the bytes.
///
/// Only ever encoded: decoding one skips every field (the client decodes the plain `M`).
pub struct Encoded<M> {
    bytes: Bytes,
    message: PhantomData<fn() -> M>,
}

impl<M: Message> Encoded<M> {
    /// Encodes `message` once.
    pub fn new(message: &M) -> Self {
        Self { bytes: message.encode_to_vec().into(), message: PhantomData }
    }

    /// An `M` from its encoding, made earlier by `M::encode` (not checked: a caller decoding
    /// other bytes as an `M` would see garbage).
    pub fn from_encoding(bytes: Bytes) -> Self {
        Self { bytes, message: PhantomData }
    }

    /// The message's encoding.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The message back from its encoding.
    pub fn decode(&self) -> Result<M, DecodeError>
    where
        M: Default,
    {
        M::decode(self.bytes.clone())
    }
}

impl<M> Clone for Encoded<M> {
    fn clone(&self) -> Self {
        Self { bytes: self.bytes.clone(), message: PhantomData }
    }
}

impl<M> Default for Encoded<M> {
    fn default() -> Self {
        Self { bytes: Bytes::new(), message: PhantomData }
    }
}

impl<M> fmt::Debug for Encoded<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Encoded<{}>({} bytes)", std::any::type_name::<M>(), self.bytes.len())
    }
}

impl<M> Message for Encoded<M> {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        buf.put_slice(&self.bytes);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.bytes.len()
    }

    fn clear(&mut self) {
        self.bytes = Bytes::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{GetTopNResponse, RankedProduct};

    #[test]
    fn sends_the_bytes_of_the_message_it_was_made_from() {
        let message = GetTopNResponse {
            products: vec![RankedProduct { product_id: 7, rank: 1, score: 2.5, ..Default::default() }],
            total: 1,
            date: "2026-12-01".into(),
            next_page_token: "t".into(),
            version: 3,
            profile: "default".into(),
        };
        let encoded = Encoded::new(&message);
        let mut sent = Vec::new();
        encoded.encode(&mut sent).expect("room");
        assert_eq!(sent, message.encode_to_vec());
        assert_eq!(encoded.encoded_len(), sent.len());
        assert_eq!(GetTopNResponse::decode(&sent[..]).expect("decodes"), message);
        assert_eq!(encoded.clone().decode().expect("decodes"), message);
    }
}
