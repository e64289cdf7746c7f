//! A benchmark run: validate the options, bootstrap once, then the load phase and the run phase, each on
//! `--num-threads` threads (one current-thread event loop each) with `--connections` connections per thread, while
//! the calling thread reports progress once a second. A query workload also finds the query service, and between
//! the phases makes sure the primary index is online; its run-phase connections are query connections.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use settee_client::{resolve, BootstrapOptions, Cluster, SDK_FEATURES};
use tokio::time::Instant;

use crate::cli::RunArgs;
use crate::distribution::{KeyChooser, RequestDistribution};
use crate::driver::{drive, PhaseClock, Plan, Shared};
use crate::http_link::HttpLink;
use crate::keys::{KeyFormat, KeyWriter};
use crate::link::LinkFactory;
use crate::progress::Progress;
use crate::query_driver::{drive_queries, QueryConn, QueryWork};
use crate::query_request::QueryMode;
use crate::query_setup::{ensure_index, query_work};
use crate::report::{BenchResult, PhaseResult, TimelinePoint, RESULT_FORMAT_VERSION};
use crate::rng::{splitmix64, Rng};
use crate::spec::Spec;
use crate::stats::{IntervalStats, OpKind, PhaseStats};
use crate::values::{ValuePool, JSON_BYTES_MIN};
use crate::workload::{slice_of, Cursor, OpSource, Records, Workload};
use crate::BenchError;

/// The largest value the generator sends (memcached's default item limit is 1 MiB).
const VALUE_BYTES_MAX: usize = 1024 * 1024;
const KEY_BYTES_MAX: usize = 250;
/// Connections in one run at most.
const CONNECTIONS_MAX: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PhaseKind {
    Load,
    Run,
}

impl PhaseKind {
    fn name(self) -> &'static str {
        match self {
            PhaseKind::Load => "load",
            PhaseKind::Run => "run",
        }
    }
}

/// Everything the phases share, built once from the options.
struct Setup {
    args: RunArgs,
    spec: Spec,
    factory: LinkFactory,
    keys: KeyWriter,
    values: ValuePool,
    workload: Option<Workload>,
    distribution: RequestDistribution,
    connections: usize,
    /// The query endpoints and request bodies, for a query workload (`--workload e`, `--query`).
    query: Option<Arc<QueryWork>>,
}

/// Runs the benchmark the options describe, prints progress and the final table (unless `--quiet`), writes the
/// `--json` and `--histogram` files, and returns the result.
pub fn run_bench(args: &RunArgs) -> Result<BenchResult, BenchError> {
    let spec = validate(args)?;
    let started_unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let factory = rt.block_on(bootstrap(args, &spec))?;
    let workload = args.workload;
    // Query workloads run over YCSB records, so that `--workload e` loads the documents every `--query` reads.
    let ycsb = workload.is_some() || args.query.is_some();
    let key_format = args.key_format.unwrap_or(if ycsb { KeyFormat::Ycsb } else { KeyFormat::Number });
    let query = match query_kinds(args) {
        Some(kinds) => {
            let Spec::Couchbase { bucket, .. } = &spec else {
                return Err(BenchError::Invalid("query workloads need a couchbase:// target".into()));
            };
            Some(Arc::new(rt.block_on(query_work(args, &factory, bucket, &kinds))?))
        }
        None => None,
    };
    let values = match (ycsb, args.json_docs) {
        (true, _) => ValuePool::ycsb(args.field_count, args.field_length),
        (false, true) => {
            ValuePool::json(args.seed, args.min_size.max(JSON_BYTES_MIN), args.max_size.max(JSON_BYTES_MIN))
        }
        (false, false) => ValuePool::binary(args.seed, args.min_size, args.max_size),
    };
    let keys = KeyWriter::new(key_format, &args.key_prefix);
    // Room for the longest collection prefix (5 LEB128 bytes).
    if keys.max_len() + 5 > KEY_BYTES_MAX {
        return Err(BenchError::Invalid(format!("--key-prefix makes keys longer than {KEY_BYTES_MAX} bytes")));
    }
    let setup = Setup {
        args: args.clone(),
        spec,
        factory,
        keys,
        values,
        workload,
        distribution: args
            .request_distribution
            .unwrap_or_else(|| workload.map_or(RequestDistribution::Uniform, Workload::default_distribution)),
        connections: args.num_threads * args.connections_per_thread,
        query,
    };
    let mut histograms = Vec::new();
    let load = if args.no_population { None } else { Some(run_phase(&setup, &rt, PhaseKind::Load, &mut histograms)?) };
    if let (Some(work), Spec::Couchbase { bucket, .. }) = (&setup.query, &setup.spec) {
        let took = rt.block_on(ensure_index(work, bucket, args.collection.as_deref()))?;
        if !args.quiet {
            let which = if args.query.is_some_and(QueryMode::by_field) { "field0" } else { "primary" };
            eprintln!("settee bench: the {which} index is online and current ({:.1} s)", took.as_secs_f64());
        }
    }
    let run = if args.populate_only { None } else { Some(run_phase(&setup, &rt, PhaseKind::Run, &mut histograms)?) };
    let result = BenchResult {
        format_version: RESULT_FORMAT_VERSION,
        spec: setup.spec.to_string(),
        target: setup.spec.kind().to_owned(),
        label: args.label.clone().unwrap_or_else(|| setup.spec.kind().to_owned()),
        case: args.case.clone().unwrap_or_else(|| describe(&setup)),
        workload: match args.query {
            Some(mode) => format!("query-{}", mode.name()),
            None => workload.map_or("pillowfight", Workload::name).to_owned(),
        },
        options: serde_json::to_value(args).unwrap_or_default(),
        started_unix_ms,
        load,
        run,
    };
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&result).map_err(|e| BenchError::Invalid(e.to_string()))?)?;
    }
    if let Some(path) = &args.histogram {
        std::fs::write(path, crate::report::histogram_text(&histograms))?;
    }
    if !args.quiet {
        println!("settee bench: {} — {}, {} connection(s)", result.spec, result.case, setup.connections);
        print!("{}", crate::report::table(&result));
    }
    Ok(result)
}

fn validate(a: &RunArgs) -> Result<Spec, BenchError> {
    let spec = Spec::parse(&a.spec)?;
    let bad = |why: String| Err(BenchError::Invalid(why));
    let connections = a.num_threads.saturating_mul(a.connections_per_thread);
    if a.num_threads == 0 || a.connections_per_thread == 0 || connections > CONNECTIONS_MAX {
        return bad(format!("threads × connections must be 1..={CONNECTIONS_MAX}"));
    }
    if a.batch_size == 0 || a.batch_size > 100_000 {
        return bad("--batch-size must be 1..=100000".into());
    }
    if a.num_items == 0 {
        return bad("--num-items must be at least 1".into());
    }
    if a.min_size > a.max_size || a.max_size > VALUE_BYTES_MAX {
        return bad(format!("need --min-size <= --max-size <= {VALUE_BYTES_MAX}"));
    }
    if a.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) || !(a.warmup >= 0.0 && a.warmup.is_finite()) {
        return bad("--duration must be positive and --warmup not negative".into());
    }
    if !(a.timeout > 0.0 && a.timeout.is_finite()) {
        return bad("--timeout must be positive".into());
    }
    if a.rate_limit == Some(0) {
        return bad("--rate-limit must be at least 1".into());
    }
    if let Spec::Memcached { .. } = spec {
        if a.collection.is_some() || a.durability.is_some_and(|d| d.wire().is_some()) {
            return bad("memcached:// has no collections and no durability".into());
        }
    }
    if query_kinds(a).is_some() {
        if matches!(spec, Spec::Memcached { .. }) {
            return bad("query workloads need a couchbase:// target".into());
        }
        if a.rate_limit.is_some() {
            return bad("--rate-limit is for KV workloads; query workloads run closed loop".into());
        }
        if a.scan_length == 0 {
            return bad("--scan-length must be at least 1".into());
        }
    }
    Ok(spec)
}

/// The query operation types a run sends, if it sends any: those of `--query`, or workload E's scans.
fn query_kinds(a: &RunArgs) -> Option<Vec<OpKind>> {
    match (a.query, a.workload) {
        (Some(mode), _) => Some(vec![mode.kind()]),
        (None, Some(w)) if w.uses_query() => Some(vec![OpKind::Scan]),
        _ => None,
    }
}

/// Bootstraps the smart client once (config, collection id) or resolves the memcached address.
async fn bootstrap(args: &RunArgs, spec: &Spec) -> Result<LinkFactory, BenchError> {
    match spec {
        Spec::Memcached { addr } => Ok(LinkFactory::Memcached { addr: resolve(addr).await? }),
        Spec::Couchbase { seeds, bucket, tls } => {
            let tls = match tls {
                false => None,
                true => Some(tls_client(args)?),
            };
            let options = BootstrapOptions {
                user: args.username.clone(),
                password: args.password.clone(),
                bucket: bucket.clone(),
                features: SDK_FEATURES.to_vec(),
                agent: format!("settee-bench/{}", env!("CARGO_PKG_VERSION")),
                tls,
                auth: settee_client::Auth::Plain,
            };
            let (cluster, mut conn) = Cluster::bootstrap(seeds, options).await?;
            let cid = match &args.collection {
                Some(path) => Cluster::collection_id(&mut conn, path).await?,
                None => 0,
            };
            Ok(LinkFactory::Couchbase {
                cluster: Box::new(cluster),
                cid,
                durability: args.durability.and_then(|d| d.wire()),
            })
        }
    }
}

/// The CAs a `couchbases://` run trusts: `--cacert` (a node's `/pools/default/certificate`, or `<data-dir>/certs/ca.pem`).
fn tls_client(args: &RunArgs) -> Result<settee_client::TlsClient, BenchError> {
    let path = args.cacert.as_ref().ok_or_else(|| BenchError::Invalid("couchbases:// needs --cacert PATH".into()))?;
    let pem = std::fs::read_to_string(path)
        .map_err(|e| BenchError::Invalid(format!("cannot read --cacert {}: {e}", path.display())))?;
    settee_client::TlsClient::with_roots_pem(&pem).map_err(|e| BenchError::Invalid(format!("--cacert: {e}")))
}

fn describe(s: &Setup) -> String {
    let a = &s.args;
    let mix = match (a.query, s.workload) {
        (Some(mode), _) => format!("query {}", mode.name()),
        (None, Some(w)) => w.name().to_owned(),
        (None, None) => format!("{}% set, {}-{} B", a.set_pct, a.min_size, a.max_size),
    };
    match s.query {
        // One request in flight per connection: the batch size does not apply.
        Some(_) => format!("{mix}, {} items", a.num_items),
        None => format!("{mix}, {} items, batch {}", a.num_items, a.batch_size),
    }
}

/// One connection's source of operations in `phase`.
fn source_for(s: &Setup, phase: PhaseKind, index: usize, chooser: &KeyChooser) -> OpSource {
    let (lo, hi) = slice_of(s.args.num_items, index, s.connections);
    match (phase, s.workload) {
        (PhaseKind::Load, w) => {
            let ycsb = w.is_some() || s.args.query.is_some();
            OpSource::Load { next: lo, end: hi, kind: if ycsb { OpKind::Insert } else { OpKind::Set } }
        }
        (PhaseKind::Run, _) if s.args.query.is_some() => {
            let kind = s.args.query.map_or(OpKind::Lookup, QueryMode::kind);
            OpSource::Query { kind, chooser: chooser.clone() }
        }
        (PhaseKind::Run, Some(w)) => OpSource::Ycsb { mix: w.mix(), chooser: chooser.clone() },
        (PhaseKind::Run, None) => OpSource::Mix {
            set_pct: s.args.set_pct,
            chooser: chooser.clone(),
            records: s.args.num_items,
            sequential: (s.args.sequential && hi > lo).then_some(Cursor { next: lo, lo, hi }),
        },
    }
}

fn plan_for(s: &Setup, phase: PhaseKind, index: usize, chooser: &KeyChooser) -> Plan {
    let a = &s.args;
    // A query connection has one request in flight (HTTP/1.1), so a cycle is one operation.
    let window = if phase == PhaseKind::Run && s.query.is_some() { 1 } else { a.batch_size };
    let mut seed = a.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (phase as u64);
    let rng = Rng::new(splitmix64(&mut seed));
    let (limit, schedule) = match phase {
        PhaseKind::Load => (None, None),
        PhaseKind::Run => {
            let schedule = a.rate_limit.map(|rate| {
                let interval = Duration::from_secs_f64(s.connections as f64 / rate as f64);
                (interval, interval.mul_f64(index as f64 / s.connections as f64))
            });
            (a.num_cycles.map(|c| c.saturating_mul(window as u64)), schedule)
        }
    };
    Plan {
        source: source_for(s, phase, index, chooser),
        rng,
        window,
        limit,
        schedule,
        precise_sleep: a.connections_per_thread == 1,
    }
}

/// The rendezvous of the worker threads and the reporter: everyone connected, then the clock, then go.
struct Gate {
    connected: Barrier,
    clock: OnceLock<PhaseClock>,
    started: Barrier,
}

fn run_phase(
    s: &Setup,
    rt: &tokio::runtime::Runtime,
    phase: PhaseKind,
    histograms: &mut Vec<(String, hdrhistogram::Histogram<u64>)>,
) -> Result<PhaseResult, BenchError> {
    let a = &s.args;
    let shared = Arc::new(Shared {
        keys: s.keys.clone(),
        values: s.values.clone(),
        records: Records::new(a.num_items),
        stop: AtomicBool::new(false),
        op_timeout: Duration::from_secs_f64(a.timeout),
        retry_tmpfail: a.retry_tmpfail,
    });
    let chooser = KeyChooser::new(s.distribution, a.num_items);
    let gate = Arc::new(Gate {
        connected: Barrier::new(a.num_threads + 1),
        clock: OnceLock::new(),
        started: Barrier::new(a.num_threads + 1),
    });
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut thread_stats = Vec::new();
    let mut threads = Vec::new();
    for t in 0..a.num_threads {
        let stats = Arc::new(Mutex::new(PhaseStats::new()));
        thread_stats.push(stats.clone());
        let plans: Vec<(usize, Plan)> = (0..a.connections_per_thread)
            .map(|c| t * a.connections_per_thread + c)
            .map(|i| (i, plan_for(s, phase, i, &chooser)))
            .collect();
        let (factory, shared, gate, done_tx) = (s.factory.clone(), shared.clone(), gate.clone(), done_tx.clone());
        let kind = match (&s.query, phase) {
            // Workload E inserts over KV; `--query` sends queries only.
            (Some(work), PhaseKind::Run) => ConnKind::Query { work: work.clone(), kv: s.workload.is_some() },
            _ => ConnKind::Kv,
        };
        let handle = std::thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn(move || {
                let r = worker(factory, kind, plans, shared, stats, &gate);
                let _ = done_tx.send(());
                r
            })
            .map_err(BenchError::Io)?;
        threads.push(handle);
    }
    drop(done_tx);
    gate.connected.wait();
    let start = Instant::now();
    let record_from = start + Duration::from_secs_f64(if phase == PhaseKind::Run { a.warmup } else { 0.0 });
    let stop_at = match phase {
        PhaseKind::Run if a.num_cycles.is_none() => {
            Some(record_from + Duration::from_secs_f64(a.duration.unwrap_or(10.0)))
        }
        _ => None,
    };
    let clock = PhaseClock { start, record_from, stop_at };
    let _ = gate.clock.set(clock);
    gate.started.wait();

    let mut progress = Progress::new(phase.name(), a.quiet);
    let timeline =
        rt.block_on(report_until_done(&thread_stats, &shared, &mut done_rx, clock, &mut progress, a.num_threads));
    let end = Instant::now();
    progress.finish();

    let mut failures = Vec::new();
    for h in threads {
        match h.join() {
            Ok(Ok(errors)) => failures.extend(errors),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(BenchError::Invalid("a worker thread panicked".into())),
        }
    }
    for f in &failures {
        eprintln!("settee bench: a connection stopped early: {f}");
    }
    let mut total = PhaseStats::new();
    for st in &thread_stats {
        total.merge_totals(&st.lock().unwrap_or_else(|p| p.into_inner()));
    }
    let measured_end = stop_at.map_or(end, |t| t.min(end));
    let duration_s = measured_end.saturating_duration_since(record_from).as_secs_f64();
    for kind in crate::stats::OP_KINDS {
        if let Some(t) = &total.ops[kind as usize] {
            histograms.push((format!("{} {}", phase.name(), kind.name()), t.latency.clone()));
        }
    }
    Ok(PhaseResult::from_stats(&total, duration_s, s.connections, timeline))
}

/// What a phase's connections are.
#[derive(Clone)]
enum ConnKind {
    /// KV links driven by [`drive`].
    Kv,
    /// Query connections driven by [`drive_queries`], with a KV link each when the workload inserts (`kv`).
    Query { work: Arc<QueryWork>, kv: bool },
}

/// One open connection of a phase.
enum Conn {
    Kv(crate::link::Link),
    Query(QueryConn, Arc<QueryWork>),
}

/// Opens the connection of plan `index`: a KV link, or an HTTP connection to query node `index % nodes` (and a
/// KV link when the workload inserts).
async fn open(factory: &LinkFactory, kind: &ConnKind, index: usize) -> Result<Conn, BenchError> {
    match kind {
        ConnKind::Kv => Ok(Conn::Kv(factory.open().await?)),
        ConnKind::Query { work, kv } => {
            let endpoint = work.endpoints[index % work.endpoints.len()].clone();
            let http = HttpLink::connect(endpoint).await.map_err(|e| BenchError::QueryService(e.to_string()))?;
            let kv = if *kv { Some(factory.open().await?) } else { None };
            Ok(Conn::Query(QueryConn { http, kv }, work.clone()))
        }
    }
}

/// One worker thread: open its connections, meet the others at the gate, drive every connection to the end of
/// the phase. Returns the errors of connections that stopped early; failing to connect fails the run.
fn worker(
    factory: LinkFactory,
    kind: ConnKind,
    plans: Vec<(usize, Plan)>,
    shared: Arc<Shared>,
    stats: Arc<Mutex<PhaseStats>>,
    gate: &Gate,
) -> Result<Vec<String>, BenchError> {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            gate.connected.wait();
            gate.started.wait();
            return Err(e.into());
        }
    };
    rt.block_on(async move {
        let mut conns = Vec::with_capacity(plans.len());
        let mut failed = None;
        for (index, _) in &plans {
            match open(&factory, &kind, *index).await {
                Ok(c) => conns.push(c),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Nothing else runs on this thread while it waits for the others.
        gate.connected.wait();
        gate.started.wait();
        if let Some(e) = failed {
            return Err(e);
        }
        let clock = *gate.clock.get().expect("the reporter sets the clock before opening the gate");
        let tasks: Vec<_> = conns
            .into_iter()
            .zip(plans)
            .map(|(conn, (_, plan))| {
                let (shared, stats) = (shared.clone(), stats.clone());
                tokio::spawn(async move {
                    match conn {
                        Conn::Query(q, work) => drive_queries(q, plan, &shared, &work, &stats, clock).await,
                        Conn::Kv(link) => drive(link, plan, &shared, &stats, clock).await,
                    }
                })
            })
            .collect();
        let mut errors = Vec::new();
        for t in tasks {
            match t.await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => errors.push(e.to_string()),
                Err(e) => errors.push(e.to_string()),
            }
        }
        Ok(errors)
    })
}

/// Turns the threads' interval statistics into timeline points and progress lines.
struct Sampler<'a> {
    thread_stats: &'a [Arc<Mutex<PhaseStats>>],
    clock: PhaseClock,
    interval: IntervalStats,
    total_ops: u64,
    last: Instant,
    timeline: Vec<TimelinePoint>,
}

impl Sampler<'_> {
    fn sample(&mut self, now: Instant, progress: &mut Progress) {
        self.interval.reset();
        for st in self.thread_stats {
            st.lock().unwrap_or_else(|p| p.into_inner()).drain_interval(&mut self.interval);
        }
        let secs = now.saturating_duration_since(self.last).as_secs_f64().max(1e-9);
        self.last = now;
        self.total_ops += self.interval.ops;
        let h = &self.interval.latency;
        let p = |q| if h.is_empty() { 0.0 } else { h.value_at_quantile(q) as f64 / 1000.0 };
        let point = TimelinePoint {
            t_s: now.saturating_duration_since(self.clock.record_from).as_secs_f64(),
            ops: self.interval.ops,
            ops_per_sec: self.interval.ops as f64 / secs,
            errors: self.interval.errors,
            retries: self.interval.retries,
            p50_us: p(0.5),
            p99_us: p(0.99),
        };
        // The interval that ends as the warm-up ends holds no measured operation.
        let warming = now <= self.clock.record_from && self.clock.record_from > self.clock.start;
        progress.update(now.saturating_duration_since(self.clock.start), &point, self.total_ops, warming);
        if !warming {
            self.timeline.push(point);
        }
    }
}

/// Samples the threads' interval statistics once a second for the progress line and the timeline, until every
/// worker thread is done. Ctrl-C stops the phase (a second one exits at once).
async fn report_until_done(
    thread_stats: &[Arc<Mutex<PhaseStats>>],
    shared: &Shared,
    done_rx: &mut tokio::sync::mpsc::UnboundedReceiver<()>,
    clock: PhaseClock,
    progress: &mut Progress,
    threads: usize,
) -> Vec<TimelinePoint> {
    let mut sampler = Sampler {
        thread_stats,
        clock,
        interval: IntervalStats::new(),
        total_ops: 0,
        last: clock.start,
        timeline: Vec::new(),
    };
    let mut tick = tokio::time::interval_at(clock.start + Duration::from_secs(1), Duration::from_secs(1));
    let mut finished = 0;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut interrupted = false;
    while finished < threads {
        tokio::select! {
            _ = tick.tick() => sampler.sample(Instant::now(), progress),
            d = done_rx.recv() => match d {
                Some(()) => finished += 1,
                None => break,
            },
            _ = &mut ctrl_c, if !interrupted => {
                interrupted = true;
                shared.stop.store(true, Ordering::Relaxed);
                progress.note("stopping: finishing the requests in flight (Ctrl-C again to quit at once)");
                tokio::spawn(async {
                    if tokio::signal::ctrl_c().await.is_ok() {
                        std::process::exit(130);
                    }
                });
            }
        }
    }
    let now = Instant::now();
    if now.saturating_duration_since(sampler.last) > Duration::from_millis(50) {
        sampler.sample(clock.stop_at.map_or(now, |t| t.min(now)), progress);
    }
    sampler.timeline
}
