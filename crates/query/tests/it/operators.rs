//! Operator-level tests: statements planned over the in-memory datastore, their operator trees pulled row by row,
//! with the datastore calls counted by a recording wrapper around the real `MemDatastore` (every call goes
//! through to it). They pin what the corpus cannot see in results alone: how much each operator reads, holds and
//! waits for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use settee_query::ast::Statement;
use settee_query::datastore::{
    BucketInfo, Consistency, CreateIndexRequest, Datastore, Document, Keyspace, KeyspaceName, MemDatastore, Mutation,
    MutationOutcome,
};
use settee_query::exec::{build, Cx, Memory, Row, CANCELLED, TIMED_OUT};
use settee_query::functions::FnContext;
use settee_query::index::{IndexDef, IndexEntry, IndexState, ScanRange};
use settee_query::plan::{compile_select, parse_query_context, Compiler, Plan};
use settee_query::value::{Object, Value};
use settee_query::{Engine, QueryError, Sink, StatementEnv};

/// What the operators asked of the datastore.
#[derive(Default)]
struct Calls {
    fetched: AtomicUsize,
    scan_limits: Mutex<Vec<usize>>,
    scanned: AtomicUsize,
    /// The index of each consistency wait.
    waits: Mutex<Vec<String>>,
}

/// The real in-memory datastore, with its keyspaces' calls counted.
struct Recording {
    inner: MemDatastore,
    calls: Arc<Calls>,
}

struct RecordingKeyspace {
    inner: Arc<dyn Keyspace>,
    calls: Arc<Calls>,
}

impl Keyspace for RecordingKeyspace {
    fn name(&self) -> &KeyspaceName {
        self.inner.name()
    }
    fn fetch(&self, keys: &[Arc<str>]) -> Result<Vec<Option<Document>>, QueryError> {
        self.calls.fetched.fetch_add(keys.len(), Ordering::Relaxed);
        self.inner.fetch(keys)
    }
    fn count(&self) -> Result<u64, QueryError> {
        self.inner.count()
    }
    fn mutate(&self, m: &Mutation) -> Result<MutationOutcome, QueryError> {
        self.inner.mutate(m)
    }
    fn indexes(&self) -> Vec<(IndexDef, IndexState)> {
        self.inner.indexes()
    }
    fn scan(
        &self,
        index: &str,
        range: &ScanRange,
        after: Option<&IndexEntry>,
        limit: usize,
    ) -> Result<Vec<IndexEntry>, QueryError> {
        self.calls.scan_limits.lock().unwrap().push(limit);
        let got = self.inner.scan(index, range, after, limit)?;
        self.calls.scanned.fetch_add(got.len(), Ordering::Relaxed);
        Ok(got)
    }
    fn wait_for(&self, index: &str, consistency: &Consistency, deadline_nanos: i64) -> Result<(), QueryError> {
        self.calls.waits.lock().unwrap().push(index.to_string());
        self.inner.wait_for(index, consistency, deadline_nanos)
    }
}

impl Datastore for Recording {
    fn keyspace(&self, name: &KeyspaceName) -> Result<Arc<dyn Keyspace>, QueryError> {
        Ok(Arc::new(RecordingKeyspace { inner: self.inner.keyspace(name)?, calls: self.calls.clone() }))
    }
    fn buckets(&self) -> Vec<BucketInfo> {
        self.inner.buckets()
    }
    fn create_index(&self, request: CreateIndexRequest) -> Result<(), QueryError> {
        self.inner.create_index(request)
    }
    fn drop_index(&self, keyspace: &KeyspaceName, name: &str) -> Result<(), QueryError> {
        self.inner.drop_index(keyspace, name)
    }
    fn build_indexes(&self, keyspace: &KeyspaceName, names: &[String]) -> Result<(), QueryError> {
        self.inner.build_indexes(keyspace, names)
    }
    fn all_indexes(&self) -> Vec<(KeyspaceName, IndexDef, IndexState)> {
        self.inner.all_indexes()
    }
}

const DOCS: i64 = 5000;

/// `DOCS` documents `d0000`... in `b._default._default` with `n` (0..DOCS), `grp` (n % 10), `tag` (n % 3 as a
/// string) and `ref` (the id of the next document, missing for every fifth), a primary index and one on `n`.
fn dataset() -> Recording {
    let ds = MemDatastore::new();
    let ks = KeyspaceName::new("b", "_default", "_default");
    for n in 0..DOCS {
        let mut o = Object::new();
        o.insert("n".into(), Value::int(n));
        o.insert("grp".into(), Value::int(n % 10));
        o.insert("tag".into(), Value::string(&(n % 3).to_string()));
        if n % 5 != 0 {
            o.insert("ref".into(), Value::string(&format!("d{:04}", n + 1)));
        }
        ds.put(&ks, &format!("d{n:04}"), Value::object(o));
    }
    let rec = Recording { inner: ds, calls: Arc::default() };
    for ddl in ["CREATE PRIMARY INDEX ON b", "CREATE INDEX ix_n ON b(n)"] {
        run_statement(&rec, ddl).unwrap();
    }
    rec.calls.fetched.store(0, Ordering::Relaxed);
    rec
}

struct Discard;

impl Sink for Discard {
    fn start(&mut self, _: Option<&str>, _: &serde_json::Value) -> Result<(), QueryError> {
        Ok(())
    }
    fn row(&mut self, _: &Value, _: Option<&[Arc<str>]>) -> Result<bool, QueryError> {
        Ok(true)
    }
}

fn run_statement(ds: &dyn Datastore, text: &str) -> Result<(), QueryError> {
    let (named, positional, state) = (HashMap::new(), Vec::new(), AtomicU8::new(0));
    let (clock, random) = (|| 0i64, || 7u64);
    let cx = Cx::new(ds, &named, &positional, FnContext { now_nanos: 0, clock: &clock, random: &random }, &state);
    let env = StatementEnv { context: parse_query_context("")?, ..Default::default() };
    Engine::new().execute(&settee_query::parse(text)?, text, &env, &cx, &mut Discard)
}

fn plan_of(ds: &dyn Datastore, text: &str) -> Plan {
    let Statement::Select(select) = settee_query::parse(text).unwrap() else { panic!("{text} is not a SELECT") };
    let mut c = Compiler::new(ds, parse_query_context("").unwrap());
    compile_select(&mut c, &select).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Pulls the statement's rows with a request context set up by `setup`; returns the output values, or the
/// first error.
fn pull(ds: &Recording, text: &str, setup: impl FnOnce(&mut Cx<'_>)) -> Result<Vec<Value>, QueryError> {
    let plan = plan_of(ds, text);
    let (named, positional, state) = (HashMap::new(), Vec::new(), AtomicU8::new(0));
    let (clock, random) = (|| 0i64, || 7u64);
    let mut cx = Cx::new(ds, &named, &positional, FnContext { now_nanos: 0, clock: &clock, random: &random }, &state);
    setup(&mut cx);
    let mut root = build(&plan.root, &Row::new(plan.slots));
    let mut out = Vec::new();
    while let Some(row) = root.next(&cx)? {
        out.push(row.vals.get(plan.out).cloned().unwrap_or_default());
    }
    Ok(out)
}

fn ints(rows: &[Value]) -> Vec<i64> {
    rows.iter().map(|v| v.to_json_string().parse().unwrap()).collect()
}

#[test]
fn limit_stops_the_scan_and_its_fetches_once_it_has_its_rows() {
    // Proves LIMIT pulls no further than it needs: 5 rows out of 5000 fetch only the scan's first chunk, not the
    // keyspace.
    let ds = dataset();
    let rows = pull(&ds, "SELECT RAW n FROM b LIMIT 5", |_| {}).unwrap();
    assert_eq!(rows.len(), 5);
    let fetched = ds.calls.fetched.load(Ordering::Relaxed);
    assert!(fetched <= 64, "{fetched} documents fetched for 5 rows");
}

#[test]
fn index_scans_read_growing_chunks_and_never_skip_or_repeat_an_entry() {
    // Proves the index scan's chunking: the first read asks for 64 entries, each next one for twice as many up to
    // 4096, and the rows are every matching document exactly once, in index order.
    let ds = dataset();
    let rows = ints(&pull(&ds, "SELECT RAW n FROM b WHERE n >= 100", |_| {}).unwrap());
    assert_eq!(rows, (100..DOCS).collect::<Vec<_>>());
    let limits = ds.calls.scan_limits.lock().unwrap().clone();
    assert_eq!(&limits[..4], &[64, 128, 256, 512], "{limits:?}");
    assert!(limits.iter().all(|&l| l <= 4096), "{limits:?}");
    assert_eq!(ds.calls.scanned.load(Ordering::Relaxed), (DOCS - 100) as usize);
}

#[test]
fn order_under_a_limit_holds_only_the_top_rows() {
    // Proves ORDER BY with LIMIT keeps a bounded top-k (at most 1024 rows, or twice offset + limit, between
    // prunings): sorting 5000 documents by a non-index expression fits in a 512 KiB quota with LIMIT 3, and without
    // the LIMIT the same sort is refused with 5500.
    let ds = dataset();
    let quota = |cx: &mut Cx<'_>| cx.memory = Memory::new(512 << 10);
    let top = pull(&ds, "SELECT RAW n FROM b WHERE n >= 0 ORDER BY -n LIMIT 3", quota).unwrap();
    assert_eq!(ints(&top), [4999, 4998, 4997]);
    let all = pull(&ds, "SELECT RAW n FROM b WHERE n >= 0 ORDER BY -n", quota);
    assert_eq!(all.map(|r| r.len()).unwrap_err().code(), 5500);
}

#[test]
fn group_by_charges_each_group_and_fails_past_the_quota() {
    // Proves grouping holds one accumulator per group against the request's quota: 10 groups fit in 16 KiB, 5000
    // groups (one per document) do not.
    let ds = dataset();
    let quota = |cx: &mut Cx<'_>| cx.memory = Memory::new(16 << 10);
    let few = pull(&ds, "SELECT RAW COUNT(*) FROM b WHERE n >= 0 GROUP BY grp", quota).unwrap();
    assert_eq!(ints(&few), vec![DOCS / 10; 10]);
    let many = pull(&ds, "SELECT RAW COUNT(*) FROM b WHERE n >= 0 GROUP BY n", quota);
    assert_eq!(many.unwrap_err().code(), 5500);
}

#[test]
fn distinct_and_union_drop_repeats_and_union_all_keeps_them() {
    // Proves the de-duplicating operators: DISTINCT over 5000 rows gives the 3 tags; UNION of two overlapping
    // selects gives each value once, UNION ALL every row.
    let ds = dataset();
    let mut tags: Vec<String> = pull(&ds, "SELECT DISTINCT RAW tag FROM b WHERE n >= 0", |_| {})
        .unwrap()
        .iter()
        .map(Value::to_json_string)
        .collect();
    tags.sort();
    assert_eq!(tags, ["\"0\"", "\"1\"", "\"2\""]);
    let q = |op: &str| format!("SELECT RAW n FROM b WHERE n < 10 {op} SELECT RAW n FROM b WHERE n BETWEEN 5 AND 14");
    let mut union = ints(&pull(&ds, &q("UNION"), |_| {}).unwrap());
    union.sort();
    assert_eq!(union, (0..15).collect::<Vec<_>>());
    assert_eq!(pull(&ds, &q("UNION ALL"), |_| {}).unwrap().len(), 20);
}

#[test]
fn lookup_joins_drop_unmatched_rows_and_left_joins_keep_them() {
    // Proves ON KEYS joins: an inner join drops documents whose `ref` is missing or names no document (every
    // fifth has none; the last one points past the end), a LEFT join keeps them with the right side MISSING.
    let ds = dataset();
    let inner = pull(&ds, "SELECT RAW a.n FROM b AS a JOIN b AS c ON KEYS a.ref WHERE a.n < 20", |_| {}).unwrap();
    assert_eq!(ints(&inner), [1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19]);
    let left =
        pull(&ds, "SELECT RAW [a.n, c.n] FROM b AS a LEFT JOIN b AS c ON KEYS a.ref WHERE a.n BETWEEN 4 AND 5", |_| {})
            .unwrap();
    assert_eq!(left.iter().map(Value::to_json_string).collect::<Vec<_>>(), ["[4,5]", "[5,null]"]);
}

#[test]
fn offset_skips_rows_and_let_binds_once_per_row() {
    // Proves OFFSET discards the rows before it and LET evaluates per row.
    let ds = dataset();
    let rows =
        pull(&ds, "SELECT RAW x FROM b LET x = n * 2 WHERE n >= 10 ORDER BY n LIMIT 3 OFFSET 2", |_| {}).unwrap();
    assert_eq!(ints(&rows), [24, 26, 28]);
}

#[test]
fn a_consistency_wait_happens_once_per_index_in_a_request() {
    // Proves request_plus waits for each index once per request, even when a correlated subquery scans it again for
    // every outer row.
    let ds = dataset();
    let plus = |cx: &mut Cx<'_>| cx.consistency = Consistency::RequestPlus;
    let text = "SELECT RAW (SELECT RAW COUNT(*) FROM b AS i WHERE i.n < o.n)[0] FROM b AS o WHERE o.n < 5";
    let rows = pull(&ds, text, plus).unwrap();
    assert_eq!(ints(&rows), [0, 1, 2, 3, 4]);
    let mut waits = ds.calls.waits.lock().unwrap().clone();
    let scans = waits.len();
    waits.dedup();
    assert_eq!(scans, waits.len(), "an index waited for twice in one request: {waits:?}");
    assert!(!waits.is_empty());
}

#[test]
fn a_timed_out_or_cancelled_request_stops_at_its_next_row() {
    // Proves every operator tree checks the request's state per row: once the watcher sets it, the next pull fails
    // with 1080 (timeout) or the cancellation error, and nothing more is read.
    let ds = dataset();
    for (flag, code) in [(TIMED_OUT, 1080), (CANCELLED, 5010)] {
        let plan = plan_of(&ds, "SELECT RAW n FROM b WHERE n >= 0");
        let (named, positional, state) = (HashMap::new(), Vec::new(), AtomicU8::new(0));
        let (clock, random) = (|| 0i64, || 7u64);
        let cx = Cx::new(&ds, &named, &positional, FnContext { now_nanos: 0, clock: &clock, random: &random }, &state);
        let mut root = build(&plan.root, &Row::new(plan.slots));
        assert!(root.next(&cx).unwrap().is_some());
        state.store(flag, Ordering::Relaxed);
        let err = root.next(&cx).map(|_| ()).unwrap_err();
        assert_eq!(err.code(), code, "{err}");
    }
}
