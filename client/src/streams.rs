//! The streaming reads: a ranking walked page by page through one version, and a watched
//! top that resumes by itself.

use futures_util::{StreamExt, TryStreamExt};
use tonic::Status;

use crate::retry::next_wait;
use crate::{Answers, RankingClient, v1};

impl RankingClient {
    /// Every page of a ranking from the first `request` names (its `offset` and `limit`)
    /// to the last, following `next_page_token`: all pages come from the version the first
    /// one was read from, so no product is repeated or skipped while the ranking is
    /// recomputed. The stream ends after the last page or at the first error (a
    /// FAILED_PRECONDITION means that version is no longer kept: walk again).
    ///
    /// ```no_run
    /// # async fn demo(client: ranking_client::RankingClient) -> Result<(), tonic::Status> {
    /// use futures_util::TryStreamExt;
    /// use ranking_client::v1;
    ///
    /// let mut pages = client.pages(v1::GetTopNRequest { limit: 1_000, ..Default::default() });
    /// while let Some(page) = pages.try_next().await? {
    ///     println!("{} products of version {}", page.products.len(), page.version);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn pages(&self, request: v1::GetTopNRequest) -> Answers<v1::GetTopNResponse> {
        let client = self.clone();
        futures_util::stream::try_unfold((client, Some(request)), |(client, request)| async move {
            let Some(request) = request else { return Ok(None) };
            let page = client.top_n(request.clone()).await?;
            let next = (!page.next_page_token.is_empty()).then(|| v1::GetTopNRequest {
                page_token: page.next_page_token.clone(),
                offset: 0,
                ..request
            });
            Ok(Some((page, (client, next))))
        })
        .boxed()
    }

    /// Every entry of a ranking, best first, following page tokens as [`RankingClient::pages`].
    pub fn entries(&self, request: v1::GetTopNRequest) -> Answers<v1::RankedProduct> {
        self.pages(request)
            .map_ok(|page| futures_util::stream::iter(page.products.into_iter().map(Ok)))
            .try_flatten()
            .boxed()
    }

    /// Watches a top (WatchTopN): its current state at once, then each change. A stream
    /// that breaks (a lost connection, a replica shutting down with UNAVAILABLE) is opened
    /// again by itself after the retry policy's delay; the first message after a resume is the
    /// then current state. Other errors, or the retry policy's attempts in a row running out,
    /// end the stream with that error.
    pub fn watch_top_n(&self, request: v1::WatchTopNRequest) -> Answers<v1::WatchTopNResponse> {
        struct Watching {
            inner: crate::Inner,
            retry: crate::RetryPolicy,
            request: v1::WatchTopNRequest,
            stream: Option<tonic::Streaming<v1::WatchTopNResponse>>,
            /// The waits left before giving up; a message received starts them over.
            delays: backon::ExponentialBackoff,
        }
        let retry = self.retry_policy();
        let start = Watching { inner: self.raw(), delays: retry.delays(), retry, request, stream: None };
        futures_util::stream::unfold(Some(start), |state| async move {
            let mut w = state?;
            loop {
                let broken = match w.stream.as_mut() {
                    None => match w.inner.watch_top_n(w.request.clone()).await {
                        Ok(response) => {
                            w.stream = Some(response.into_inner());
                            continue;
                        }
                        Err(status) => status,
                    },
                    Some(stream) => match stream.message().await {
                        Ok(Some(message)) => {
                            w.delays = w.retry.delays();
                            return Some((Ok(message), Some(w)));
                        }
                        Ok(None) => Status::unavailable("the watch stream ended"),
                        Err(status) => status,
                    },
                };
                w.stream = None;
                let Some(delay) = next_wait(&mut w.delays, &broken) else {
                    return Some((Err(broken), None));
                };
                tokio::time::sleep(delay).await;
            }
        })
        .boxed()
    }
}
