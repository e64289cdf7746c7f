//! A full disk through the store's file-system seam ([`FaultInjector`]): the failing write is an error, the store
//! is poisoned (every later call refused, one log line), and after a restart everything synced before is intact.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use settee_store::{conformance::record, FaultInjector, FjallConfig, FjallStore, StoreError, VbStore};
use settee_types::VbId;

/// Counts ERROR events per `store` field, installed once as the process-wide subscriber (a thread-scoped one
/// races with other tests over tracing's per-callsite interest cache). Enough to prove a poisoning logs once.
#[derive(Default)]
struct ErrorCounter(Mutex<HashMap<String, usize>>);

impl ErrorCounter {
    fn global() -> &'static ErrorCounter {
        static COUNTER: OnceLock<&'static ErrorCounter> = OnceLock::new();
        COUNTER.get_or_init(|| {
            let counter: &'static ErrorCounter = Box::leak(Box::default());
            tracing::subscriber::set_global_default(counter).expect("no other global subscriber in this binary");
            counter
        })
    }

    fn errors_for(&self, store: &Path) -> usize {
        self.0.lock().unwrap().get(&store.display().to_string()).copied().unwrap_or(0)
    }
}

struct StoreField(Option<String>);

impl tracing::field::Visit for StoreField {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "store" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl tracing::Subscriber for &'static ErrorCounter {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            let mut store = StoreField(None);
            event.record(&mut store);
            *self.0.lock().unwrap().entry(store.0.unwrap_or_default()).or_default() += 1;
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Injected ENOSPC on a write: that write fails with the cause, the store is poisoned and logs it once, nothing
/// of the failed batch is stored, and a reopened store has every record synced before the failure.
#[test]
fn enospc_on_write_poisons_and_keeps_synced_data() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let config = FjallConfig { faults: Some(faults.clone()), ..FjallConfig::default() };
    let vb = VbId(100);
    let synced: Vec<_> = (1..=100).map(|i| record(format!("k{i}").as_bytes(), b"synced", i, false)).collect();
    let errors = ErrorCounter::global();
    {
        let s = FjallStore::open_with(dir.path(), config).unwrap();
        s.write_batch_with_state(vb, &synced, Some(&settee_store::conformance::vb_state(100))).unwrap();
        s.sync().unwrap();
        faults.set_disk_full(true);
        let failed = s.write_batch(vb, &[record(b"lost", b"v", 101, false)]);
        assert!(matches!(&failed, Err(StoreError::Io(msg)) if msg.contains("no space left")), "{failed:?}");
        assert!(s.is_poisoned());
        faults.set_disk_full(false);
        assert_eq!(s.write_batch(vb, &[record(b"later", b"v", 102, false)]), Err(StoreError::Poisoned));
        assert_eq!(s.sync(), Err(StoreError::Poisoned));
        assert_eq!(s.get(vb, b"k1"), Err(StoreError::Poisoned));
        assert_eq!(s.purge_tombstones(vb, u32::MAX), Err(StoreError::Poisoned));
    }
    assert_eq!(errors.errors_for(dir.path()), 1, "the poisoning is logged once");
    let s = FjallStore::open(dir.path()).unwrap();
    for r in &synced {
        assert_eq!(s.get(vb, &r.key).unwrap().as_ref(), Some(r));
    }
    assert_eq!(s.get(vb, b"lost").unwrap(), None);
    assert_eq!(s.high_seqno(vb).unwrap(), 100);
    assert_eq!(s.vb_state(vb).unwrap(), Some(settee_store::conformance::vb_state(100)));
    s.write_batch(vb, &[record(b"after", b"v", 101, false)]).unwrap();
}

/// Injected ENOSPC on a sync: the sync fails and poisons, so no write after it can be reported durable.
#[test]
fn enospc_on_sync_poisons() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let s = FjallStore::open_with(dir.path(), FjallConfig { faults: Some(faults.clone()), ..FjallConfig::default() })
        .unwrap();
    s.write_batch(VbId(1), &[record(b"a", b"v", 1, false)]).unwrap();
    faults.set_disk_full(true);
    assert!(matches!(s.sync(), Err(StoreError::Io(_))));
    faults.set_disk_full(false);
    assert_eq!(s.sync(), Err(StoreError::Poisoned));
    assert_eq!(s.compact(), Err(StoreError::Poisoned));
}
