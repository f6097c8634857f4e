//! What a dependency's failure is to the application: [`StoreError`], whichever store failed.

/// The cause of a store failure, kept whole (its own `source()` chain included) and shared,
/// so that an error handed to several waiters still says what went wrong underneath.
pub type Cause = std::sync::Arc<dyn std::error::Error + Send + Sync>;

/// A dependency failed. Every variant means "nothing was confirmed": the caller may retry.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or refused the operation. The cause is in the message
    /// (callers and logs read it there), not repeated as the error's source.
    #[error("{store} unavailable: {cause}")]
    Unavailable {
        /// Which store (`database`, `ranking store`).
        store: &'static str,
        /// What went wrong underneath.
        cause: Cause,
    },
    /// The operation would pass a bound the operator set (snapshot entries, custom signal
    /// columns): the store is fine, the request is too big for it.
    #[error("{0}")]
    Exceeds(String),
    /// A ranking is stored in a layout this release does not read: a newer release wrote it
    /// while this one's announcement had lapsed (it was frozen, or just started). Never read
    /// as anything else; the writers go back to a layout every live replica reads within one
    /// round of the announcements, and the board's next publication is readable again.
    #[error(
        "ranking store unavailable: a ranking is stored in layout {found}, which this release does not read (it reads {}..={}); a newer release wrote it",
        super::READS.start(), super::READS.end()
    )]
    Layout {
        /// The layout found.
        found: super::Layout,
    },
    /// The store answered with data this service cannot interpret.
    #[error("{0}")]
    Corrupt(String),
    /// A change of a day's rankings made under a lease that is no longer held (this replica
    /// stalled past its lease, and another may hold the day now): nothing was changed.
    #[error("lost the lease {lease}: {detail}")]
    LostLease {
        /// The lease.
        lease: String,
        /// What the store knows of the holder now.
        detail: String,
    },
    /// An event of a batch that what is stored refuses (a retraction of another product's
    /// event, of an UNLIKE or a RETRACT, of an event too old): nothing of the batch was
    /// written.
    #[error("event {index}: {field}: {reason}")]
    Refused {
        /// Its place in the batch.
        index: usize,
        /// The field at fault.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// The database failed with `cause` (an error, or a message).
    pub fn database(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable { store: "database", cause: Cause::from(cause.into()) }
    }

    /// The ranking store failed with `cause` (an error, or a message).
    pub fn ranking(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Unavailable { store: "ranking store", cause: Cause::from(cause.into()) }
    }
}
