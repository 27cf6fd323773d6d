//! The metrics jobs emit, read back through a recorder of our own (the
//! only one in this test binary, installed globally).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{Limit, count, eventually, fast, sqlite};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use serde_json::json;
use sluice_jobs::JobState;
use sluice_jobs::worker::{QueueConfig, WorkerPool};
use sluice_jobs::{JobStore, NewJob};
use sluice_jobs_http::discord::DiscordConfig;
use sluice_jobs_http::http::HttpApis;
use sluice_limit::Limiter;
use sluice_sim::discord::DiscordLimits;
use sluice_sim::{Faults, Scope, Sim, SimConfig};

/// Counter totals and histogram sample counts by `name{label=value,…}`.
#[derive(Debug, Default)]
struct Seen(Mutex<BTreeMap<String, f64>>);

impl Seen {
    fn get(&self, key: &str) -> f64 {
        self.0.lock().unwrap().get(key).copied().unwrap_or(0.0)
    }
}

struct Cell(String, &'static Seen);

impl metrics::CounterFn for Cell {
    fn increment(&self, value: u64) {
        *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() += value as f64;
    }
    fn absolute(&self, value: u64) {
        self.1
            .0
            .lock()
            .unwrap()
            .insert(self.0.clone(), value as f64);
    }
}

impl metrics::HistogramFn for Cell {
    fn record(&self, _value: f64) {
        *self.1.0.lock().unwrap().entry(self.0.clone()).or_default() += 1.0;
    }
}

struct Rec(&'static Seen);

fn render(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Rec {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(Arc::new(Cell(render(key), self.0)))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(Arc::new(Cell(render(key), self.0)))
    }
}

fn seen() -> &'static Seen {
    static SEEN: OnceLock<&'static Seen> = OnceLock::new();
    SEEN.get_or_init(|| {
        let seen: &'static Seen = Box::leak(Box::default());
        metrics::set_global_recorder(Rec(seen)).expect("the only recorder");
        sluice_jobs::metrics::describe();
        seen
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_counted_by_queue_kind_reason_and_endpoint() {
    let seen = seen();
    let sim = Sim::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    sim.set_faults(
        Scope::Api("linear".into()),
        Faults {
            force_429: true,
            force_429_retry_after_ms: 10,
            ..Faults::default()
        },
    )
    .unwrap();
    sim.set_discord_limits(DiscordLimits {
        global_per_second: 1,
        ..DiscordLimits::default()
    });
    let apis = HttpApis::new()
        .api("slack", &format!("{}/slack", sim.url()))
        .unwrap()
        .api("linear", &format!("{}/linear", sim.url()))
        .unwrap();
    let limiter = Limiter::new(common::api_rules()).unwrap();
    let discord = DiscordConfig {
        global_limit: Some(Limit::per_second(100)),
        ..DiscordConfig::at(format!("{}/discord/api/v10", sim.url()))
    };
    let handlers = sluice_jobs_http::handlers(&limiter, apis, discord, common::client()).unwrap();
    let store = Arc::new(sqlite().await);
    for n in 0..3 {
        let payload = json!({"api": "slack", "path": "/api/chat.postMessage", "body": {"n": n}});
        store
            .enqueue(NewJob::new("m", "http", payload))
            .await
            .unwrap();
    }
    let throttled = json!({"api": "linear", "path": "/graphql"});
    store
        .enqueue(NewJob::new("m", "http", throttled).max_attempts(1))
        .await
        .unwrap();
    for g in 0..2 {
        let payload = json!({"guild_id": (10 + g).to_string(), "name": "r"});
        store
            .enqueue(NewJob::new("d", "discord.create_role", payload))
            .await
            .unwrap();
    }
    let pool = WorkerPool::builder(Arc::clone(&store), limiter)
        .handlers(handlers)
        .queue(QueueConfig::new("m").rate(Limit::sliding_window(2, Duration::from_secs(1))))
        .queue(QueueConfig::new("d").unlimited())
        .configure(|c| {
            fast(c);
            c.max_throttles = 1;
        })
        .start()
        .unwrap();
    eventually("every job finished", || async {
        count(&*store, "m", JobState::Completed).await == 3
            && count(&*store, "m", JobState::Dead).await == 1
            && count(&*store, "d", JobState::Completed).await == 2
    })
    .await;
    pool.shutdown(Duration::from_secs(5)).await;

    let c = |k: &str| seen.get(k);
    assert_eq!(c("sluice_jobs_completed_total{kind=http,queue=m}"), 3.0);
    assert_eq!(
        c("sluice_jobs_completed_total{kind=discord.create_role,queue=d}"),
        2.0
    );
    // One throttle free, the second uses the only attempt.
    assert_eq!(
        c("sluice_jobs_failed_total{kind=http,queue=m,reason=throttled}"),
        1.0
    );
    assert_eq!(
        c("sluice_jobs_failed_total{kind=http,queue=m,reason=dead}"),
        1.0
    );
    assert_eq!(c("sluice_jobs_upstream_429_total{endpoint=linear}"), 2.0);
    assert_eq!(c("sluice_job_duration_seconds{kind=http,queue=m}"), 5.0);
    assert_eq!(c("sluice_job_wait_seconds{queue=m}"), 5.0);
    // 5 runs at 2 in any second: some waited.
    assert!(c("sluice_jobs_rate_limit_waits_total{queue=m}") >= 1.0);
    let global = sim.discord().global_429 as f64;
    assert!(global >= 1.0, "two creations at a global 1/s");
    assert_eq!(c("sluice_jobs_global_429_total{}"), global);
    assert_eq!(
        c("sluice_jobs_upstream_429_total{endpoint=POST /guilds/:id/roles}"),
        global
    );
    // Each global 429 failed a run: rescheduled, or (past the one free
    // throttle) retried with an attempt.
    assert_eq!(
        c("sluice_jobs_failed_total{kind=discord.create_role,queue=d,reason=throttled}")
            + c("sluice_jobs_failed_total{kind=discord.create_role,queue=d,reason=retry}"),
        global
    );
    assert!(c("sluice_jobs_retry_after_seconds{}") >= 2.0 + global);
}
