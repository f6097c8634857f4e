//! Reading one pull of the JetStream source: its messages until the server ends the pull,
//! or, when that end does not reach this client, until the pull has expired and nothing more
//! arrives.

use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;

/// What a pull's messages came to.
pub(super) enum Pulled<M> {
    /// The pull ended (or was cut off); what it delivered.
    Batch(Vec<M>),
    /// `stop` came first; what had been delivered, to release.
    Stopped(Vec<M>),
}

/// Reads one pull's messages until the server ends it, or else until [`pull_deadline`] has
/// passed and nothing has arrived for `max_wait` (at least 100 ms): the end of a pull expired
/// at the server does not always reach the client. Messages still arriving after the
/// deadline are ones the server sent before the pull expired, held up by a busy client: they
/// are read, since a message left in the pull's inbox would wait for redelivery after the
/// ack wait, and the whole drain with it. The reading stays bounded: a pull holds at most a
/// batch of messages. An error from the stream ends the pull.
pub(super) async fn read_pull<M, E: std::fmt::Display>(
    messages: impl futures_util::Stream<Item = Result<M, E>>,
    max_wait: Duration,
    stop: &CancellationToken,
) -> Pulled<M> {
    let mut batch = Vec::new();
    let mut messages = std::pin::pin!(messages);
    let quiet = quiet(max_wait);
    let mut deadline = tokio::time::Instant::now() + pull_deadline(max_wait);
    loop {
        tokio::select! {
            next = messages.next() => match next {
                Some(Ok(m)) => {
                    batch.push(m);
                    deadline = deadline.max(tokio::time::Instant::now() + quiet);
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "jetstream fetch ended early");
                    break;
                }
                None => break,
            },
            () = tokio::time::sleep_until(deadline) => {
                // Past the pull's expiry, and quiet: take what has arrived. A message still
                // on its way is redelivered after the ack wait (a DUPLICATE if it commits
                // twice).
                while let Some(Some(Ok(m))) = messages.next().now_or_never() {
                    batch.push(m);
                }
                tracing::debug!(records = batch.len(), "jetstream pull ended by its deadline");
                break;
            }
            () = stop.cancelled() => return Pulled::Stopped(batch),
        }
    }
    Pulled::Batch(batch)
}

/// How long a pull is read before this client stops waiting for its end. The server ends a
/// pull at its expiry (the batch wait) with a status message, after which it sends nothing
/// more for it; async-nats waits 5 s past the expiry when that status does not arrive, which
/// happens under load when several replicas share the consumer (seen with nats-server 2.9:
/// a partly filled pull of a busy consumer held to the client's 5 s, every replica's rate
/// falling with it). So this client gives up on its own after the batch wait and as long
/// again (at least 100 ms): by then the server has expired the pull.
fn pull_deadline(max_wait: Duration) -> Duration {
    max_wait + quiet(max_wait)
}

/// How long a pull may go without a message past its expiry before this client stops
/// waiting: the batch wait, at least 100 ms.
fn quiet(max_wait: Duration) -> Duration {
    max_wait.max(Duration::from_millis(100))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pull's messages: message `i` arrives `gaps[i]` after the one before, then the
    /// stream ends when `ends`, or else never says more.
    fn pull(gaps: Vec<Duration>, ends: bool) -> impl futures_util::Stream<Item = Result<usize, String>> {
        futures_util::stream::unfold(0usize, move |i| {
            let gap = gaps.get(i).copied();
            async move {
                match gap {
                    Some(gap) => {
                        tokio::time::sleep(gap).await;
                        Some((Ok(i), i + 1))
                    }
                    None if ends => None,
                    None => futures_util::future::pending().await,
                }
            }
        })
    }

    fn read(pulled: Pulled<usize>) -> Vec<usize> {
        match pulled {
            Pulled::Batch(batch) => batch,
            Pulled::Stopped(_) => panic!("not stopped"),
        }
    }

    const WAIT: Duration = Duration::from_millis(100);

    #[tokio::test(start_paused = true)]
    async fn messages_still_arriving_past_the_deadline_are_read() {
        let stop = CancellationToken::new();
        // 150 ms in, then 60 more every 50 ms: the last arrives at 3.15 s, long past the
        // pull's deadline (200 ms), as a busy client reads what the server sent in time.
        let mut gaps = vec![Duration::from_millis(150)];
        gaps.extend(std::iter::repeat_n(Duration::from_millis(50), 60));
        let started = tokio::time::Instant::now();
        let batch = read(read_pull(pull(gaps, false), WAIT, &stop).await);
        assert_eq!(batch, (0..61).collect::<Vec<_>>(), "every message of the pull");
        assert_eq!(started.elapsed(), Duration::from_millis(3_150) + WAIT, "cut once quiet for the batch wait");
    }

    #[tokio::test(start_paused = true)]
    async fn a_pull_whose_end_never_comes_is_cut_at_its_deadline() {
        let stop = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let batch = read(read_pull(pull(vec![Duration::from_millis(10); 3], false), WAIT, &stop).await);
        assert_eq!(batch, vec![0, 1, 2]);
        assert_eq!(started.elapsed(), pull_deadline(WAIT), "nothing waited past the deadline");

        // Silent past its deadline, then a late message: the pull was over by then.
        let late = vec![Duration::from_millis(10), Duration::from_millis(500)];
        assert_eq!(read(read_pull(pull(late, false), WAIT, &stop).await), vec![0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_pull_ended_by_the_server_returns_at_once_and_stop_releases_what_came() {
        let stop = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let batch = read(read_pull(pull(vec![Duration::from_millis(5); 4], true), WAIT, &stop).await);
        assert_eq!((batch, started.elapsed()), (vec![0, 1, 2, 3], Duration::from_millis(20)));

        let stopping = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(25)).await;
            stopping.cancel();
        });
        match read_pull(pull(vec![Duration::from_millis(10); 100], false), WAIT, &stop).await {
            Pulled::Stopped(batch) => assert_eq!(batch, vec![0, 1], "what arrived before the stop, to release"),
            Pulled::Batch(_) => panic!("the stop ends the pull"),
        }
    }

    #[test]
    fn a_pull_is_read_past_its_expiry() {
        assert_eq!(pull_deadline(Duration::from_millis(100)), Duration::from_millis(200));
        assert_eq!(pull_deadline(Duration::from_millis(10)), Duration::from_millis(110));
        assert_eq!(pull_deadline(Duration::from_secs(2)), Duration::from_secs(4));
    }
}
