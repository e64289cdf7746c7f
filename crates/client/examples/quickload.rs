//! A quick pipelined load against a KV node, for a rough throughput figure until `settee bench` exists:
//! `cargo run --release -p settee-client --example quickload -- 127.0.0.1:11210 [connections] [batch] [seconds] [set%]`.
//! Each connection writes `batch` requests (SET or GET of 200-byte values over 10,000 keys) in one write and
//! reads all the replies before the next batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_client::Connection;
use settee_mcbp::{encode_request, Feature, Request};
use settee_types::vbucket_for_key;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:11210").parse()?;
    let conns: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
    let batch: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(32);
    let secs: u64 = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(10);
    let set_pct: u64 = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(50);
    let ops = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for t in 0..conns {
        let (ops, errors) = (ops.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let features = [Feature::Collections, Feature::MutationSeqno, Feature::Json];
            let mut c = Connection::connect(addr, "Administrator", "password", Some("default"), &features).await?;
            let value = vec![b'x'; 200];
            let mut out = Vec::new();
            let mut n: u64 = t as u64 * 7919;
            while Instant::now() < deadline {
                out.clear();
                for _ in 0..batch {
                    n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let key = format!("key-{}", (n >> 33) % 10_000);
                    let k = c.key(0, key.as_bytes());
                    let is_set = (n >> 20) % 100 < set_pct;
                    let req = Request {
                        vbucket: vbucket_for_key(key.as_bytes(), 1024).0,
                        extras: if is_set { &[0; 8] } else { &[] },
                        value: if is_set { &value } else { &[] },
                        ..Request::client(if is_set { 0x01 } else { 0x00 }, &k)
                    };
                    encode_request(&mut out, &req);
                }
                c.send_raw(&out).await?;
                for _ in 0..batch {
                    let r = c.read_response().await?;
                    if r.status != 0 && r.status != 1 {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                ops.fetch_add(batch as u64, Ordering::Relaxed);
            }
            Ok::<(), settee_client::ClientError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let total = ops.load(Ordering::Relaxed);
    println!(
        "{} ops in {secs} s = {:.0} ops/s ({conns} connections, batch {batch}, {set_pct}% sets, {} errors)",
        total,
        total as f64 / secs as f64,
        errors.load(Ordering::Relaxed)
    );
    Ok(())
}
