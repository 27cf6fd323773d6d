//! Ledger write throughput: batches of 256 records (the writer's batch)
//! inserted with their rollups in one transaction, into a SQLite file
//! (WAL) and, with `SLUICE_TEST_POSTGRES_URL`, into PostgreSQL. Criterion
//! reports records per second (`thrpt`).
//!
//! `cargo bench -p sluice-ledger --bench write -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_ledger::{LedgerStore, Record};

const BATCH: usize = 256;

fn batch(tenant: &str, n: &mut u64) -> Vec<Record> {
    (0..BATCH)
        .map(|i| {
            *n += 1;
            let mut r = Record::new(
                format!("req-{n}"),
                tenant,
                "model",
                "openai",
                if i.is_multiple_of(2) {
                    "openai/gpt-4o"
                } else {
                    "openai/gpt-4o-mini"
                },
                "/v1/chat/completions",
            );
            r.key_id = Some(format!("key{}", i % 8));
            r.feature = Some(format!("feature{}", i % 4));
            r.status = 200;
            r.prompt_tokens = 1_000;
            r.completion_tokens = 200;
            r.cost_nanos = 270_000;
            r.latency_ms = 300;
            r
        })
        .collect()
}

fn write(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
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
    let mut group = c.benchmark_group("ledger_write");
    group.throughput(Throughput::Elements(BATCH as u64));
    let tenant = format!("bench-{}", std::process::id());
    for (name, store) in &stores {
        let mut n = 0;
        group.bench_function(format!("{name}_batch_{BATCH}"), |b| {
            b.iter(|| {
                let records = batch(&tenant, &mut n);
                rt.block_on(store.insert(black_box(&records))).unwrap();
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(dir);
}

criterion_group!(benches, write);
criterion_main!(benches);
