//! This replica's own publications in flight: while one of a ranking is being published and
//! its copy installed, an announcement or a poll of that ranking loads nothing. The publisher
//! installs the copy it made (its [`Snapshots::install_copy`]); loading the same version from
//! the store meanwhile would build it a second time (from its delta or its packed copy), and
//! the install would wait for it. A publication that fails after the store took it is
//! loaded by the next poll.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::Snapshots;
use crate::ports::RankingKey;

/// The rankings this replica is publishing, each with how many publications of it are in
/// flight.
#[derive(Default)]
pub(super) struct Own(Mutex<HashMap<RankingKey, usize>>);

/// A publication of one ranking in flight, until it is dropped (its copy installed or the
/// publication given up).
pub struct OwnPublication {
    own: Arc<Snapshots>,
    key: RankingKey,
}

impl Own {
    fn change(&self, key: RankingKey, up: bool) {
        let mut own = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let count = own.entry(key).or_default();
        if up {
            *count += 1;
        } else {
            *count = count.saturating_sub(1);
            if *count == 0 {
                own.remove(&key);
            }
        }
    }

    pub(super) fn contains(&self, key: RankingKey) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains_key(&key)
    }
}

impl Snapshots {
    /// Notes that this replica publishes `key` now, until the returned guard is dropped.
    pub fn publishing(self: &Arc<Self>, key: RankingKey) -> OwnPublication {
        self.own.change(key, true);
        OwnPublication { own: Arc::clone(self), key }
    }
}

impl Drop for OwnPublication {
    fn drop(&mut self) {
        self.own.own.change(self.key, false);
    }
}
