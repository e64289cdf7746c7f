//! Background threads yield the CPU to the request path. A mutation is acknowledged from memory and its flush is
//! not on the path of a request unless a durable write waits for it, so when the CPUs are saturated the flushers
//! and fjall's flush and compaction workers run at a lower priority than the connections. Couchbase does the same:
//! kv_engine runs its writer threads (flusher and compaction) at nice 19 on Linux.
//!
//! settee uses nice 10 (a CFS weight of 110 against 1024 at nice 0: about a tenth of a connection thread's share
//! when all are runnable). At nice 19 (weight 15) the flushers all but stop under a saturating write load: on two
//! CPUs, 30 s of 100% sets at batch 50 grew the checkpoints until the quota refused writes (457 k TMPFAILs), where
//! nice 10 ran the same 30 s at the same rate without one (BENCHMARKS.md, "Background threads yield"). Whatever
//! the priority, the checkpoints are charged to the bucket's quota, so a load the disk cannot follow for long meets
//! TMPFAIL rather than unbounded memory.

/// The nice value of background threads.
pub(crate) const BACKGROUND_NICE: i32 = 10;

#[cfg(target_os = "linux")]
mod os {
    extern "C" {
        fn setpriority(which: i32, who: u32, prio: i32) -> i32;
    }
    const PRIO_PROCESS: i32 = 0;

    /// Sets the nice value of one thread (Linux keeps one per thread; `tid` 0 is the calling thread).
    pub(super) fn set_nice(tid: u32, nice: i32) -> std::io::Result<()> {
        // SAFETY: setpriority reads its three integer arguments and touches no memory of ours.
        if unsafe { setpriority(PRIO_PROCESS, tid, nice) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// Lowers the calling thread to [`BACKGROUND_NICE`]; logs and carries on if the system refuses.
pub(crate) fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    if let Err(e) = os::set_nice(0, BACKGROUND_NICE) {
        tracing::warn!(error = %e, "cannot lower a background thread's priority");
    }
}

/// Lowers every thread of this process whose name starts with `prefix` (threads a library started, such as
/// fjall's flush and compaction workers); returns how many were lowered.
pub(crate) fn lower_threads_named(prefix: &str) -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
        let mut lowered = 0;
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
            let named = std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.starts_with(prefix));
            if named {
                match os::set_nice(tid, BACKGROUND_NICE) {
                    Ok(()) => lowered += 1,
                    Err(e) => tracing::warn!(error = %e, tid, "cannot lower a background thread's priority"),
                }
            }
        }
        lowered
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = prefix;
        0
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_of(tid: u32) -> i32 {
        // Field 19 of /proc/<tid>/stat, counted after the parenthesised name.
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        after.split(' ').nth(16).unwrap().parse().unwrap()
    }

    fn tid() -> u32 {
        std::fs::read_link("/proc/thread-self").unwrap().file_name().unwrap().to_str().unwrap().parse().unwrap()
    }

    /// A lowered thread runs at the background nice value; a thread found by name is lowered, the others not.
    #[test]
    fn threads_are_lowered() {
        let own = std::thread::spawn(|| {
            lower_this_thread();
            nice_of(tid())
        });
        assert_eq!(own.join().unwrap(), BACKGROUND_NICE);

        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let named = std::thread::Builder::new()
            .name("bgtest:worker".into())
            .spawn(move || {
                tx.send(tid()).unwrap();
                done_rx.recv().unwrap();
            })
            .unwrap();
        let named_tid = rx.recv().unwrap();
        assert_eq!(nice_of(named_tid), 0);
        assert_eq!(lower_threads_named("bgtest:"), 1);
        assert_eq!(nice_of(named_tid), BACKGROUND_NICE);
        assert_eq!(nice_of(tid()), 0, "the caller keeps its priority");
        done_tx.send(()).unwrap();
        named.join().unwrap();
    }
}
