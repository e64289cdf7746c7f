//! Where password derivations run: PBKDF2 takes milliseconds of CPU (tens in a debug build), so neither a KV worker
//! thread (whose event loop serves hundreds of connections) nor an HTTP handler may run it inline.
//!
//! [`run_derivation`] runs one on tokio's blocking pool, at most [`derivations_max`] at once for the whole process:
//! a flood of wrong passwords, from any number of connections, then occupies that many threads and no more, and
//! the other CPUs stay with the connections. Callers queue (in FIFO order) for a permit; a KV connection waits for
//! its SASL answer without holding up the other connections of its worker thread.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

/// How many derivations may run at once: half the CPUs, at least one.
pub fn derivations_max() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(2)).max(1)
}

fn permits() -> &'static Semaphore {
    static PERMITS: OnceLock<Semaphore> = OnceLock::new();
    PERMITS.get_or_init(|| Semaphore::new(derivations_max()))
}

/// Runs `derive` on the blocking pool once a permit is free; None if the task could not run (the runtime is
/// shutting down), which callers treat as a failed check.
pub async fn run_derivation<T: Send + 'static>(derive: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    // The semaphore is never closed, so acquiring only waits.
    let _permit = permits().acquire().await.ok()?;
    tokio::task::spawn_blocking(derive).await.ok()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_than_the_limit_run_at_once() {
        // Proves the bound: many concurrent derivations never overlap beyond `derivations_max`, and all finish.
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let (running, peak) = (running.clone(), peak.clone());
                tokio::spawn(run_derivation(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    // Real work standing in for a login: a short PBKDF2.
                    let _ = crate::auth::ScramHash::Sha512.salted_password(b"pw", b"salt", 2_000);
                    running.fetch_sub(1, Ordering::SeqCst);
                    i
                }))
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap(), Some(i));
        }
        assert!(peak.load(Ordering::SeqCst) <= derivations_max());
    }
}
