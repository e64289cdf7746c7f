use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The file-system seam of a store ([`crate::FjallStore`], and the deterministic simulator's disk): fjall does its
/// own I/O, so faults are injected at the store boundary instead, consulted before every write (batch, vBucket
/// state, purge, compaction), every sync and every document read (a key's record, a range of the seqno index). An
/// injected failure is handled exactly like a real one: a write or sync fails and poisons the store; a read fails
/// with an I/O error and poisons nothing.
///
/// Shared as an `Arc` between the test (or an operator hook) and the store; all switches are atomics, so it can be
/// flipped while writers run. A store opened without one never fails on purpose.
#[derive(Debug, Default)]
pub struct FaultInjector {
    fail_next_write: AtomicBool,
    fail_next_sync: AtomicBool,
    fail_next_read: AtomicBool,
    disk_full: AtomicBool,
    /// Milliseconds every sync sleeps before it runs (a slow disk); 0 for none.
    sync_delay_ms: AtomicU64,
}

impl FaultInjector {
    pub fn new() -> FaultInjector {
        FaultInjector::default()
    }

    /// The next write fails with an I/O error (EIO), once.
    pub fn fail_next_write(&self) {
        self.fail_next_write.store(true, Ordering::SeqCst);
    }

    /// The next sync fails with an I/O error (EIO), once, as a failed fsync would.
    pub fn fail_next_sync(&self) {
        self.fail_next_sync.store(true, Ordering::SeqCst);
    }

    /// The next document read (a key's record, or a scan of the seqno index) fails with an I/O error, once.
    pub fn fail_next_read(&self) {
        self.fail_next_read.store(true, Ordering::SeqCst);
    }

    /// While set, every write and sync fails with "no space left on device" (ENOSPC), as on a full disk.
    pub fn set_disk_full(&self, full: bool) {
        self.disk_full.store(full, Ordering::SeqCst);
    }

    /// While non-zero, every sync first blocks its caller this long, as an fsync on a slow or saturated disk does.
    pub fn set_sync_delay(&self, delay: Duration) {
        self.sync_delay_ms.store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Whether a fault is waiting to strike: a one-shot not yet consumed, or a full disk.
    pub fn armed(&self) -> bool {
        [&self.fail_next_write, &self.fail_next_sync, &self.fail_next_read, &self.disk_full]
            .iter()
            .any(|f| f.load(Ordering::SeqCst))
    }

    pub fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::SeqCst)
    }

    /// Every fault off (the one-shots disarmed, the disk no longer full, no sync delay).
    pub fn clear(&self) {
        for f in [&self.fail_next_write, &self.fail_next_sync, &self.fail_next_read, &self.disk_full] {
            f.store(false, Ordering::SeqCst);
        }
        self.sync_delay_ms.store(0, Ordering::SeqCst);
    }

    /// What a store calls before a write: the injected failure, if one is due.
    pub fn before_write(&self) -> io::Result<()> {
        self.check(&self.fail_next_write)
    }

    /// What a store calls before a document read.
    pub fn before_read(&self) -> io::Result<()> {
        if self.fail_next_read.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("input/output error (injected read)"));
        }
        Ok(())
    }

    /// What a store calls before a sync (after the delay of a slow disk, if one is set).
    pub fn before_sync(&self) -> io::Result<()> {
        let delay = self.sync_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            // The flusher's own thread, never an async worker, calls sync.
            std::thread::sleep(Duration::from_millis(delay));
        }
        self.check(&self.fail_next_sync)
    }

    fn check(&self, one_shot: &AtomicBool) -> io::Result<()> {
        if self.disk_full.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left on device (injected)"));
        }
        if one_shot.swap(false, Ordering::SeqCst) {
            return Err(io::Error::other("input/output error (injected)"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-shot faults fire once; the disk-full switch fails everything until cleared; `armed` sees what is waiting
    /// and `clear` disarms it all.
    #[test]
    fn one_shot_faults_fire_once_and_disk_full_persists() {
        let f = FaultInjector::new();
        assert!(f.before_write().is_ok() && f.before_sync().is_ok());
        f.fail_next_write();
        assert!(f.before_sync().is_ok());
        assert!(f.before_write().is_err());
        assert!(f.before_write().is_ok());
        f.set_disk_full(true);
        assert_eq!(f.before_sync().unwrap_err().kind(), io::ErrorKind::StorageFull);
        assert_eq!(f.before_write().unwrap_err().kind(), io::ErrorKind::StorageFull);
        f.set_disk_full(false);
        assert!(f.before_write().is_ok());
        f.set_sync_delay(Duration::from_millis(1));
        assert!(f.before_sync().is_ok(), "a slow sync still succeeds");
        f.fail_next_read();
        assert!(f.before_write().is_ok() && f.before_sync().is_ok(), "a read fault fails only a read");
        assert!(f.before_read().is_err());
        assert!(f.before_read().is_ok());
        f.fail_next_sync();
        f.set_disk_full(true);
        assert!(f.armed() && f.is_disk_full());
        f.clear();
        assert!(!f.armed() && f.before_sync().is_ok(), "cleared, nothing strikes");
    }
}
