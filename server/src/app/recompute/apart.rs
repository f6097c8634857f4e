//! What a recompute and a live pass share when they rank a population: the work done on a
//! blocking thread (a million products' sums would hold a worker of the runtime), and the
//! hidden products left out of it.

use crate::ports::StoreError;

/// Runs `work` on a blocking thread, spawned at once: it goes on while the caller awaits
/// something else (publishes the day while the week is ranked). A panic in it is the
/// caller's.
pub(super) fn off_runtime<T, W>(work: W) -> impl Future<Output = Result<T, StoreError>> + use<T, W>
where
    T: Send + 'static,
    W: FnOnce() -> Result<T, StoreError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    async move {
        match task.await {
            Ok(done) => done,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down.
            Err(e) => Err(StoreError::ranking(e)),
        }
    }
}

/// Leaves the `hidden` products out of `items`: both ascending by product id, so one walk.
pub(super) fn without_hidden<T>(items: &mut Vec<T>, product_id: impl Fn(&T) -> i64, hidden: &[i64]) {
    let mut hidden = hidden.iter().peekable();
    items.retain(|item| {
        let id = product_id(item);
        while hidden.next_if(|h| **h < id).is_some() {}
        hidden.peek() != Some(&&id)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_products_are_left_out_in_one_walk() {
        let mut ids: Vec<i64> = (1..=10).collect();
        without_hidden(&mut ids, |id| *id, &[0, 2, 3, 9, 11]);
        assert_eq!(ids, [1, 4, 5, 6, 7, 8, 10]);
        without_hidden(&mut ids, |id| *id, &[]);
        assert_eq!(ids.len(), 7);
    }

    #[tokio::test]
    async fn work_off_the_runtime_gives_its_result() {
        assert_eq!(off_runtime(|| Ok(41 + 1)).await.expect("ran"), 42);
        assert!(off_runtime(|| Err::<(), _>(StoreError::ranking("refused"))).await.is_err());
    }
}
