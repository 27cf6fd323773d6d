//! Ledger write throughput, in records per second (criterion's `thrpt`),
//! into a SQLite file (WAL) and, with `SLUICE_TEST_POSTGRES_URL`, into
//! PostgreSQL:
//!
//! - `{engine}_writer`: the gateway's path. Records are pushed one by one
//!   into the background writer ([`Ledger`]: the bounded queue of 1,000,
//!   batches of up to 256, a spill file), which inserts each batch with
//!   its rollups in one transaction; an iteration ends when the store
//!   has taken every record. The pusher waits while the queue is full,
//!   so nothing spills and the figure is what the store absorbs.
//! - `{engine}_batch_256`: one batch through [`LedgerStore::insert`]
//!   alone, the writer's transaction without the queue.
//!
//! `cargo bench -p sluice-ledger --bench write -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_ledger::{Ledger, LedgerStore, Record};
use sluice_spool::{DEFAULT_BATCH, SpoolConfig};

/// Records per iteration of the writer bench: several queues' worth.
const THROUGH_WRITER: usize = 4_096;

fn record(tenant: &str, n: u64) -> Record {
    let mut r = Record::new(
        format!("req-{n}"),
        tenant,
        "model",
        "openai",
        if n.is_multiple_of(2) {
            "openai/gpt-4o"
        } else {
            "openai/gpt-4o-mini"
        },
        "/v1/chat/completions",
    );
    r.key_id = Some(format!("key{}", n % 8));
    r.feature = Some(format!("feature{}", n % 4));
    r.status = 200;
    r.prompt_tokens = 1_000;
    r.completion_tokens = 200;
    r.cost_nanos = 270_000;
    r.latency_ms = 300;
    r
}

fn write(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("sluice-ledger-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut stores = vec![(
        "sqlite",
        rt.block_on(LedgerStore::open(dir.join("ledger.db")))
            .unwrap(),
    )];
    if let Ok(url) = std::env::var("SLUICE_TEST_POSTGRES_URL") {
        stores.push(("postgres", rt.block_on(LedgerStore::connect(&url)).unwrap()));
    } else {
        eprintln!("SLUICE_TEST_POSTGRES_URL unset: PostgreSQL skipped");
    }
    let tenant = format!("bench-{}", std::process::id());
    let mut n = 0u64;
    let mut group = c.benchmark_group("ledger_write");
    group.sample_size(10);
    for (name, store) in &stores {
        let (ledger, task) = rt.block_on(async {
            Ledger::spawn(
                store.clone(),
                SpoolConfig::new("ledger").spill(Some(dir.join(format!("{name}-spill.jsonl")))),
            )
        });
        group.throughput(Throughput::Elements(THROUGH_WRITER as u64));
        group.bench_function(format!("{name}_writer"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let target = ledger.written() + THROUGH_WRITER as u64;
                        for _ in 0..THROUGH_WRITER {
                            while ledger.queued() >= sluice_spool::DEFAULT_QUEUE {
                                tokio::time::sleep(Duration::from_micros(200)).await;
                            }
                            n += 1;
                            ledger.push(record(&tenant, n));
                        }
                        while ledger.written() < target {
                            tokio::time::sleep(Duration::from_micros(200)).await;
                        }
                    }
                    start.elapsed()
                })
            });
        });
        assert_eq!(ledger.spilled(), 0, "the writer bench must not spill");
        rt.block_on(task.shutdown());

        group.throughput(Throughput::Elements(DEFAULT_BATCH as u64));
        group.bench_function(format!("{name}_batch_{DEFAULT_BATCH}"), |b| {
            b.iter(|| {
                let records: Vec<Record> = (0..DEFAULT_BATCH)
                    .map(|_| {
                        n += 1;
                        record(&tenant, n)
                    })
                    .collect();
                rt.block_on(store.insert(black_box(&records))).unwrap();
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, write);
criterion_main!(benches);
