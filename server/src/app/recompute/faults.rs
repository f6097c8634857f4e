//! A point where a test holds a day's work just before its first write, so that what happens
//! when another replica takes the day meanwhile can be shown on demand (the fence refusing
//! the write) rather than waited for. Unarmed, it costs a lock and a check per publication.

use tokio::sync::oneshot;

/// Armed holds, taken by the next work that reaches them.
#[derive(Default)]
pub struct FaultPoints {
    before_publish: std::sync::Mutex<Option<Hold>>,
}

/// One armed hold: told when the work arrives, and waiting for its release.
struct Hold {
    reached: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
}

impl FaultPoints {
    /// Passes at once, unless a hold is armed: then says the work arrived, and waits until the
    /// hold is released (or its releaser dropped).
    pub(super) async fn before_publish(&self) {
        let hold = self.before_publish.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(hold) = hold {
            let _ = hold.reached.send(());
            let _ = hold.release.await;
        }
    }

    /// Arms a hold of the next work just before it publishes: the first receiver resolves
    /// when the work is held there, sending on the second lets it go on.
    #[cfg(any(test, feature = "test-support"))]
    pub fn hold_before_publish(&self) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached, arrived) = oneshot::channel();
        let (release, released) = oneshot::channel();
        *self.before_publish.lock().unwrap_or_else(|p| p.into_inner()) = Some(Hold { reached, release: released });
        (arrived, release)
    }
}
