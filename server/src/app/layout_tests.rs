//! The agreement on a layout, over a shared table of announcements in memory, with tokio's
//! clock paused: replicas join, stop, freeze and wake.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::ports::Layout;

/// The announcements, and one clock every replica of a test reads (tokio's, paused).
struct Rows(Mutex<BTreeMap<String, Announced>>, Clock);

impl Rows {
    fn new() -> Arc<Self> {
        Arc::new(Self(Mutex::default(), Clock::tokio_from("2026-12-07T09:00:00Z".parse().expect("instant"))))
    }
}

#[async_trait]
impl ReplicaRows for Rows {
    async fn announce(&self, announced: &Announced) -> Result<(), StoreError> {
        self.0.lock().expect("lock").insert(announced.replica.clone(), announced.clone());
        Ok(())
    }

    async fn forget(&self, replica: Option<&str>, stale_before_ms: i64) -> Result<(), StoreError> {
        self.0
            .lock()
            .expect("lock")
            .retain(|name, a| Some(name.as_str()) != replica && a.seen_at_ms >= stale_before_ms);
        Ok(())
    }

    async fn announced_since(&self, since_ms: i64) -> Result<Vec<Announced>, StoreError> {
        Ok(self.0.lock().expect("lock").values().filter(|a| a.seen_at_ms >= since_ms).cloned().collect())
    }
}

const TTL: Duration = Duration::from_secs(15);

fn announced(replica: &str, reads: RangeInclusive<Layout>) -> Announced {
    Announced { replica: replica.into(), reads, release: format!("release-of-{replica}"), seen_at_ms: 0 }
}

async fn join(rows: &Arc<Rows>, replica: &str, reads: RangeInclusive<Layout>) -> Result<Arc<LayoutGate>, JoinError> {
    let metrics = Arc::new(crate::metrics::Metrics::new());
    LayoutGate::join(rows.clone(), (announced(replica, reads.clone()), *reads.end()), TTL, rows.1, metrics).await
}

/// Runs `gate`'s rounds until the returned token is cancelled.
fn running(gate: &Arc<LayoutGate>) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    (stop.clone(), tokio::spawn(gate.clone().run(stop)))
}

#[test]
fn the_newest_layout_every_replica_reads_is_agreed() {
    assert_eq!(agreed(&[announced("a", 1..=1), announced("b", 1..=2)]), Ok(1));
    assert_eq!(agreed(&[announced("a", 1..=2), announced("b", 1..=2)]), Ok(2));
    assert_eq!(agreed(&[announced("a", 2..=3), announced("b", 1..=2), announced("c", 2..=2)]), Ok(2));
    assert_eq!(agreed(&[announced("a", 4..=7)]), Ok(7));
    let apart = agreed(&[announced("a", 1..=1), announced("b", 1..=2), announced("c", 2..=3)]).expect_err("apart");
    assert_eq!((apart.reads_newer.replica.as_str(), apart.reads_older.replica.as_str()), ("c", "a"));
    let message = apart.to_string();
    assert!(message.contains("c (release release-of-c) reads layouts 2..=3"), "{message}");
    assert!(message.contains("a (release release-of-a) reads 1..=1"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn a_newer_layout_is_written_once_the_last_replica_that_cannot_read_it_is_gone() {
    let rows = Rows::new();
    let old = join(&rows, "old", 1..=1).await.expect("joins");
    let new = join(&rows, "new", 1..=2).await.expect("joins");
    assert_eq!((old.writes(), new.writes()), (1, 1), "the new release writes the old layout beside the old");
    let (stop_new, new_task) = running(&new);
    let (stop_old, old_task) = running(&old);
    tokio::time::sleep(TTL * 2).await;
    assert_eq!(new.writes(), 1, "while the old replica announces itself");
    let status = new.status();
    assert_eq!(status.replicas.iter().map(|a| a.replica.as_str()).collect::<Vec<_>>(), ["new", "old"]);

    // The old replica stops: its announcement goes with it, and the new one moves on at its
    // next round.
    stop_old.cancel();
    old_task.await.expect("task");
    tokio::time::sleep(TTL / 3 + Duration::from_millis(1)).await;
    assert_eq!(new.writes(), 2);
    assert_eq!(new.status().replicas.len(), 1);
    let rendered = new.metrics.render();
    assert!(rendered.contains("ranking_layout_in_force 2"), "{rendered}");
    assert!(!rendered.contains("replica=\"old\""), "a gone replica's series goes: {rendered}");

    // A rollback: an old replica starts again beside it, and the new one goes back to the
    // layout both read at its next round.
    let back = join(&rows, "old-again", 1..=1).await.expect("joins");
    assert_eq!(back.writes(), 1);
    tokio::time::sleep(TTL / 3 + Duration::from_millis(1)).await;
    assert_eq!(new.writes(), 1);
    stop_new.cancel();
    new_task.await.expect("task");
    assert!(!rows.0.lock().expect("lock").contains_key("new"), "a stopped replica withdraws its announcement");
}

#[tokio::test(start_paused = true)]
async fn a_frozen_replica_counts_until_its_announcement_lapses_and_again_when_it_wakes() {
    let rows = Rows::new();
    let old = join(&rows, "old", 1..=1).await.expect("joins");
    let new = join(&rows, "new", 1..=2).await.expect("joins");
    let (stop_new, new_task) = running(&new);
    // The old replica announces nothing (frozen): within one life of its last announcement
    // the new one still writes what it reads, after it the newer layout.
    tokio::time::sleep(TTL - TTL / 3).await;
    assert_eq!(new.writes(), 1);
    tokio::time::sleep(TTL).await;
    assert_eq!(new.writes(), 2);
    // It wakes and announces: the new one writes the old layout from its next round.
    let (stop_old, old_task) = running(&old);
    tokio::time::sleep(TTL / 3 * 2 + Duration::from_millis(2)).await;
    assert_eq!(new.writes(), 1);
    for (stop, task) in [(stop_new, new_task), (stop_old, old_task)] {
        stop.cancel();
        task.await.expect("task");
    }
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_shares_no_layout_with_the_live_ones_refuses_naming_both() {
    let rows = Rows::new();
    let newer = join(&rows, "newer", 2..=3).await.expect("joins");
    let (stop, task) = running(&newer);
    let started = tokio::time::Instant::now();
    let refused = join(&rows, "older", 1..=1).await.err().expect("refused");
    assert!(started.elapsed() >= TTL, "it waits one life of an announcement before refusing");
    let message = refused.to_string();
    assert!(message.contains("newer (release release-of-newer) reads layouts 2..=3"), "{message}");
    assert!(message.contains("older (release release-of-older) reads 1..=1"), "{message}");
    assert!(!rows.0.lock().expect("lock").contains_key("older"), "a refused replica leaves no announcement");
    assert_eq!(newer.writes(), 3);
    stop.cancel();
    task.await.expect("task");

    // The newer one gone without a word (killed): its announcement lapses within the wait.
    let rows = Rows::new();
    let killed = join(&rows, "killed", 2..=3).await.expect("joins");
    drop(killed);
    let joined = join(&rows, "older", 1..=1).await.expect("joins once the killed replica's announcement lapses");
    assert_eq!(joined.writes(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_replica_writes_no_newer_layout_than_its_own_limit() {
    let rows = Rows::new();
    let metrics = Arc::new(crate::metrics::Metrics::new());
    // Every replica reads 1..=2; this one writes at most 1 (its release's default).
    let gate =
        LayoutGate::join(rows.clone(), (announced("capped", 1..=2), 1), TTL, rows.1, metrics).await.expect("joins");
    let other = join(&rows, "other", 1..=2).await.expect("joins");
    gate.round().await.expect("round").expect("agreed");
    other.round().await.expect("round").expect("agreed");
    assert_eq!((gate.writes(), other.writes()), (1, 2), "each writes what all read, up to its own limit");
}
