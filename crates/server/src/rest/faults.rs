//! `POST /settee/testing/faults`, settee-only and off unless the node was started with `--testing-fault-injection`:
//! turns a persistent bucket's disk faults on and off (the store's `FaultInjector`), so that tests of whole
//! clusters of real processes can make a node's disk slow, failing or full (Couchbase's test suites reach the same
//! faults through memcached's testing engine). Without the flag the path does not exist.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;

use super::auth::Caller;
use super::error::RestError;
use super::form::Form;
use super::RestState;

/// The longest sync delay a test may set.
const SYNC_DELAY_MS_MAX: u64 = 600_000;

/// Form fields: `bucket` (required), `syncDelayMs` (every fsync first blocks this long; 0 for none),
/// `diskFull` (`true`/`false`), `failNextWrite` / `failNextSync` / `failNextRead` (`true`: the next one fails, once;
/// a read is a document read from disk: a background fetch, a DCP backfill, an ejected value a stream sends).
pub(crate) async fn set_faults(
    State(state): State<RestState>,
    caller: Caller,
    body: Bytes,
) -> Result<StatusCode, RestError> {
    if !state.node.config.testing_fault_injection {
        return Err(RestError::NotFound);
    }
    caller.require(caller.user.is_admin(), || "cluster.admin!write".to_owned())?;
    let form = Form::parse(&body);
    let name = form.get("bucket").ok_or_else(|| RestError::field("bucket", "The value must be supplied"))?;
    let bucket = state.node.bucket(name).ok_or(RestError::NotFound)?;
    let faults = bucket
        .persistence
        .as_ref()
        .map(|p| p.faults.clone())
        .ok_or_else(|| RestError::field("bucket", "The bucket is not persistent"))?;
    if let Some(ms) = form.get("syncDelayMs") {
        let ms = ms.parse::<u64>().ok().filter(|ms| *ms <= SYNC_DELAY_MS_MAX).ok_or_else(|| {
            RestError::field("syncDelayMs", format!("The value must be an integer between 0 and {SYNC_DELAY_MS_MAX}"))
        })?;
        faults.set_sync_delay(Duration::from_millis(ms));
    }
    if let Some(full) = form.get_bool("diskFull")? {
        faults.set_disk_full(full);
    }
    if form.get_bool("failNextWrite")? == Some(true) {
        faults.fail_next_write();
    }
    if form.get_bool("failNextSync")? == Some(true) {
        faults.fail_next_sync();
    }
    if form.get_bool("failNextRead")? == Some(true) {
        faults.fail_next_read();
    }
    tracing::warn!(bucket = %name, form = %String::from_utf8_lossy(&body), "disk faults injected for a test");
    Ok(StatusCode::OK)
}
