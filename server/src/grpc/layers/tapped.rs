//! A body passed through unchanged, with something riding along: a [`Tap`] that sees every
//! frame polled out of it and lives as long as the body (its `Drop` runs when the body is
//! finished with or abandoned). The layers' per-call bookkeeping rides on it: the call's
//! place on its connection, the standard families' message counts and end of call.

use std::pin::Pin;
use std::task::{Context, Poll};

/// What one poll of a body gave.
pub type Polled = Poll<Option<Result<http_body::Frame<bytes::Bytes>, tonic::Status>>>;

/// Rides along a [`Tapped`] body.
pub trait Tap: Send + Unpin + 'static {
    /// Sees what a poll of the body gave, before the reader does.
    fn polled(&mut self, _polled: &Polled) {}
}

/// `inner` with `tap` riding along.
pub struct Tapped<T> {
    inner: tonic::body::Body,
    tap: T,
}

impl<T: Tap> Tapped<T> {
    /// `inner` as a body again, with `tap`.
    pub fn body(inner: tonic::body::Body, tap: T) -> tonic::body::Body {
        tonic::body::Body::new(Self { inner, tap })
    }
}

impl<T: Tap> http_body::Body for Tapped<T> {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        this.tap.polled(&polled);
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
