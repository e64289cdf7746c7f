//! The requests the query service is running and has run: `system:active_requests`, `system:completed_requests`
//! and `/admin/active_requests`. Completed requests are kept in a bounded log (Couchbase's `completed-limit`,
//! 4,000), like Couchbase only those that ran for at least `completed-threshold` (1 s) or failed.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use settee_query::value::Value;

/// Most completed requests kept.
const COMPLETED_LIMIT: usize = 4_000;
/// Requests faster than this are not logged as completed, unless they failed.
const COMPLETED_THRESHOLD: Duration = Duration::from_secs(1);

/// One request while it runs.
pub struct ActiveRequest {
    pub id: String,
    pub client_context_id: String,
    pub statement: String,
    pub user: String,
    pub started: Instant,
    pub request_time: String,
    pub consistency: &'static str,
    /// Set to stop the request (timeout, client gone, or `DELETE FROM system:active_requests`).
    pub state: Arc<AtomicU8>,
}

/// What is kept of a finished request.
struct Completed {
    row: Value,
    id: String,
}

#[derive(Default)]
pub struct RequestLog {
    active: Mutex<HashMap<String, Arc<ActiveRequest>>>,
    completed: Mutex<VecDeque<Completed>>,
}

impl RequestLog {
    pub fn start(&self, r: Arc<ActiveRequest>) {
        self.active.lock().insert(r.id.clone(), r);
    }

    /// Removes a request from the active set and, if slow or failed, logs it as completed.
    pub fn finish(&self, r: &ActiveRequest, status: &str, result_count: u64, error_count: u64) {
        self.active.lock().remove(&r.id);
        let elapsed = r.started.elapsed();
        if elapsed < COMPLETED_THRESHOLD && error_count == 0 {
            return;
        }
        let mut row = row_of(r, status);
        if let Some(o) = row.object_mut() {
            o.insert("resultCount".into(), Value::int(result_count as i64));
            o.insert("errorCount".into(), Value::int(error_count as i64));
            o.insert("elapsedTime".into(), Value::from(super::response::go_duration(elapsed)));
        }
        let mut completed = self.completed.lock();
        completed.push_back(Completed { row, id: r.id.clone() });
        while completed.len() > COMPLETED_LIMIT {
            completed.pop_front();
        }
    }

    pub fn active_rows(&self) -> Vec<(Arc<str>, Value)> {
        self.active.lock().values().map(|r| (Arc::from(r.id.as_str()), row_of(r, "running"))).collect()
    }

    pub fn completed_rows(&self) -> Vec<(Arc<str>, Value)> {
        self.completed.lock().iter().map(|c| (Arc::from(c.id.as_str()), c.row.clone())).collect()
    }

    /// Stops an active request; false if none has that id.
    pub fn cancel(&self, id: &str) -> bool {
        match self.active.lock().get(id) {
            Some(r) => {
                r.state.store(settee_query::exec::CANCELLED, Ordering::Release);
                true
            }
            None => false,
        }
    }

    pub fn active_count(&self) -> usize {
        self.active.lock().len()
    }
}

fn row_of(r: &ActiveRequest, state: &str) -> Value {
    let mut o = settee_query::value::Object::new();
    o.insert("requestId".into(), Value::from(r.id.clone()));
    o.insert("clientContextID".into(), Value::from(r.client_context_id.clone()));
    o.insert("statement".into(), Value::from(r.statement.clone()));
    o.insert("users".into(), Value::from(r.user.clone()));
    o.insert("requestTime".into(), Value::from(r.request_time.clone()));
    o.insert("elapsedTime".into(), Value::from(super::response::go_duration(r.started.elapsed())));
    o.insert("state".into(), Value::string(state));
    o.insert("scanConsistency".into(), Value::string(r.consistency));
    Value::object(o)
}
