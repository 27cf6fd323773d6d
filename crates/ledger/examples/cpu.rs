//! The CPU time the usage ledger's store spends per record, a figure the
//! machine's load moves little: `records` records (the gateway's shape:
//! one tenant, two models, no key) go into a SQLite file (WAL) through
//! [`LedgerStore::insert`], `batch` at a time as the writer hands them
//! over, from a thread named as the gateway's writer ([`THREAD`]) with a
//! one-threaded runtime, as the gateway runs it. Counted: that thread's
//! CPU time and that of SQLite's connection threads (sqlx runs each
//! connection on one, `sqlx-sqlite-worker-N`), read from the kernel
//! (`/proc/self/task/*/schedstat`) around the inserts only.
//!
//! The writer's batches vary with the load (what a linger of 10 ms
//! collects, 256 at most): `vary` cycles the batch sizes through 1 to
//! 2·`batch` − 1 (mean `batch`), fixed sizes otherwise.
//!
//! ```text
//! cargo run --profile bench -p sluice-ledger --example cpu -- [records] [batch] [vary|fixed]
//! ```
//!
//! With `SLUICE_LEDGER_CPU_POSTGRES` set to a PostgreSQL URL the records
//! go there instead (through sqlx); the server's own CPU is not counted,
//! so the wall time of the inserts is printed too.
//!
//! Defaults: 20,000 records, batches of 32, varied. Instructions per
//! record, with no load in them at all: run it under
//! `valgrind --tool=callgrind` with 2,000 and 4,000 records and divide
//! the difference of the totals by 2,000.

use std::time::Duration;

use sluice_ledger::{LedgerStore, Record};

/// The gateway's ledger writer's thread name (`sluice_gateway::LEDGER_THREAD`).
const THREAD: &str = "sluice-ledger";

fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(20_000, |a| a.parse().expect("records"));
    let batch: usize = args.next().map_or(32, |a| a.parse().expect("batch"));
    let vary = args.next().is_none_or(|a| a == "vary");
    assert!(
        records > 0 && batch > 0,
        "records and batch must be above 0"
    );

    let dir = std::env::temp_dir().join(format!("sluice-ledger-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let batches = batches(records, batch, vary);
    let (rounds, counted) = (
        batches.len() - 1,
        batches[1..].iter().map(Vec::len).sum::<usize>(),
    );
    let path = dir.join("ledger.db");
    let spent = std::thread::Builder::new()
        .name(THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let store = match std::env::var("SLUICE_LEDGER_CPU_POSTGRES") {
                    Ok(url) => LedgerStore::connect(&url).await.expect("PostgreSQL"),
                    Err(_) => LedgerStore::open(&path).await.expect("store"),
                };
                // One batch first: the file's first pages, the pool's
                // connections.
                store.insert(&batches[0]).await.expect("insert");
                let (before, started) = (ledger_cpu(), std::time::Instant::now());
                for b in &batches[1..] {
                    store.insert(b).await.expect("insert");
                }
                let spent = (ledger_cpu() - before, started.elapsed());
                store.close().await;
                spent
            })
        })
        .expect("thread")
        .join()
        .expect("the writer's thread panicked");
    let _ = std::fs::remove_dir_all(&dir);
    let (spent, wall) = spent;
    let per = spent.as_secs_f64() * 1e6 / counted as f64;
    println!(
        "{counted} records in {} batches of {batch} ({}): the ledger's threads spent {:.3} s of CPU, {per:.2} µs per record; {:.3} s in all",
        rounds,
        if vary {
            "1 to 2·batch−1, mean batch"
        } else {
            "fixed"
        },
        spent.as_secs_f64(),
        wall.as_secs_f64(),
    );
}

/// `records` records in batches of `batch`, or of 1 to 2·`batch` − 1 in
/// turn; one more batch in front, for the warm-up.
fn batches(records: usize, batch: usize, vary: bool) -> Vec<Vec<Record>> {
    let mut sizes = vec![batch];
    let mut left = records;
    let mut i = 0;
    while left > 0 {
        // A stride prime to the cycle's length visits every size.
        let size = if vary {
            1 + (i * 7919) % (2 * batch - 1)
        } else {
            batch
        };
        sizes.push(size.min(left));
        left -= size.min(left);
        i += 1;
    }
    let mut n = 0u64;
    sizes
        .into_iter()
        .map(|size| {
            (0..size)
                .map(|_| {
                    n += 1;
                    record(n)
                })
                .collect()
        })
        .collect()
}

/// A record as a gateway answering a chat completion writes it.
fn record(n: u64) -> Record {
    let model = if n.is_multiple_of(2) {
        "openai/gpt-4o"
    } else {
        "openai/gpt-4o-mini"
    };
    let mut r = Record::new(
        format!("0192f0c4-6d3b-7cc1-9a1e-{n:012x}"),
        "default",
        "model",
        "openai",
        model,
        "/v1/chat/completions",
    );
    r.status = 200;
    r.prompt_tokens = 12;
    r.completion_tokens = 9;
    r.cost_nanos = 17_000;
    r.latency_ms = 1;
    r
}

/// CPU time of the ledger's threads so far: [`THREAD`] and SQLite's.
fn ledger_cpu() -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .expect("/proc (Linux only)")
        .flatten()
    {
        let dir = task.path();
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let name = name.trim_end();
        if name != THREAD && !name.starts_with("sqlx-sqlite") {
            continue;
        }
        // `schedstat`: time on the CPU (ns), time waiting for one, slices.
        total += std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Duration::from_nanos(total)
}
