//! What a key check costs on the hot path: [`KeyCache::authenticate`] on
//! a cached key (tenant and tiers cached too), next to its own floor, the
//! SHA-256 of the presented key that every check computes.
//!
//! `cargo bench -p sluice-keys --bench authenticate`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use sha2::{Digest, Sha256};
use sluice_keys::{KeyCache, KeyStore, Limits, NewKey, NewTenant};

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (cache, key) = rt.block_on(async {
        let store = KeyStore::in_memory().await.unwrap();
        let limits = Limits {
            requests_per_minute: Some(600),
            models: Some(vec!["openai/*".into(), "anthropic/*".into()]),
            ..Limits::default()
        };
        store.create_tier("pro", &limits).await.unwrap();
        store
            .create_tenant(&NewTenant {
                name: "acme".into(),
                tier: Some("pro".into()),
                ..NewTenant::default()
            })
            .await
            .unwrap();
        let issued = store
            .issue_key(&NewKey {
                tenant: "acme".into(),
                tier: Some("pro".into()),
                ..NewKey::default()
            })
            .await
            .unwrap();
        let cache = KeyCache::new(store);
        cache.authenticate(&issued.key).await.unwrap();
        (cache, issued.key)
    });
    let mut g = c.benchmark_group("key check");
    g.bench_function("sha256 of the key (floor)", |b| {
        b.iter(|| black_box(Sha256::digest(black_box(key.as_bytes()))))
    });
    g.bench_function("authenticate, cached", |b| {
        b.iter(|| rt.block_on(cache.authenticate(black_box(&key))).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
