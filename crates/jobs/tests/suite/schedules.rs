//! Schedules: ticks fire once each however many callers fire at once,
//! catch-up fires once, limits and end times end a schedule, tenants own
//! their schedules.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use sluice_jobs::schedule::{Cadence, NewSchedule};
use sluice_jobs::{AnyStore, Job, JobState, JobStore, NewJob, Timestamp};

use super::{Factory, T0, open};

fn every(ms: u64) -> Cadence {
    Cadence::every(Duration::from_millis(ms)).expect("a period in bounds")
}

fn template(tenant: &str) -> NewJob {
    NewJob::new("sched", "test.noop", json!({"n": 1})).tenant(tenant)
}

async fn fire(store: &AnyStore) -> Vec<Job> {
    store.fire_schedules(100).await.expect("fire")
}

/// Two callers fire every tick at once (two connections on PostgreSQL):
/// each tick enqueues exactly one job, whose `run_at` is the tick.
pub async fn every_tick_fires_once_across_callers<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    let other = store.clone();
    let s = NewSchedule::new("acme", "tick", every(1_000), template("acme"));
    let (stored, replaced) = store.put_schedule(s).await.expect("put");
    assert!(!replaced);
    assert_eq!(stored.next_run_at, Some(T0));
    let mut per_tick: BTreeMap<i64, usize> = BTreeMap::new();
    for _ in 0..5 {
        let (a, b) = tokio::join!(fire(&store), fire(&other));
        for job in a.iter().chain(&b) {
            assert_eq!(job.schedule.as_deref(), Some("tick"));
            assert_eq!(job.tenant, "acme");
            let tick = job.schedule_tick.expect("a tick");
            *per_tick.entry(tick.as_millis()).or_default() += 1;
        }
        // A second look at the same instant finds nothing due.
        assert!(fire(&store).await.is_empty());
        clock.advance(Duration::from_millis(1_000));
    }
    let ticks: Vec<i64> = (0..5).map(|k| T0.as_millis() + k * 1_000).collect();
    assert_eq!(per_tick.keys().copied().collect::<Vec<_>>(), ticks);
    assert!(per_tick.values().all(|n| *n == 1), "{per_tick:?}");
    let jobs = store
        .list(&sluice_jobs::ListFilter::default())
        .await
        .expect("list");
    assert_eq!(jobs.jobs.len(), 5);
    let read = store.get(jobs.jobs[0].id).await.expect("get").expect("job");
    assert_eq!(read.schedule.as_deref(), Some("tick"));
    assert_eq!(read.schedule_tick, Some(T0));
    assert_eq!(read.state, JobState::Available);
    let s = store
        .schedule("acme", "tick")
        .await
        .expect("get")
        .expect("s");
    assert_eq!(s.runs, 5);
    assert_eq!(s.last_run_at, Some(Timestamp::from_millis(ticks[4])));
}

/// After downtime a schedule fires once, for the first tick it missed,
/// and its next tick is the first one after now, on its own grid.
pub async fn missed_ticks_fire_once<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    let s = NewSchedule::new("acme", "tick", every(1_000), template("acme"));
    store.put_schedule(s).await.expect("put");
    assert_eq!(fire(&store).await.len(), 1);
    clock.advance(Duration::from_millis(10_500));
    let fired = fire(&store).await;
    assert_eq!(fired.len(), 1, "one job for ten missed ticks");
    assert_eq!(fired[0].schedule_tick, Some(T0 + Duration::from_secs(1)));
    assert_eq!(fired[0].run_at, T0 + Duration::from_millis(10_500));
    let s = store
        .schedule("acme", "tick")
        .await
        .expect("get")
        .expect("s");
    assert_eq!(s.next_run_at, Some(T0 + Duration::from_secs(11)));
    assert!(fire(&store).await.is_empty());
}

/// `limit` and `end_at` end a schedule: `next_run_at` becomes null.
pub async fn limit_and_end_at_end_a_schedule<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    let limited = NewSchedule::new("acme", "twice", every(1_000), template("acme")).limit(2);
    let ending = NewSchedule::new("acme", "until", every(1_000), template("acme"))
        .start_at(T0 + Duration::from_secs(1))
        .end_at(T0 + Duration::from_millis(2_500));
    store.put_schedule(limited).await.expect("put");
    store.put_schedule(ending).await.expect("put");
    let mut fired = Vec::new();
    for _ in 0..6 {
        fired.extend(fire(&store).await);
        clock.advance(Duration::from_secs(1));
    }
    let count = |name: &str| {
        fired
            .iter()
            .filter(|j| j.schedule.as_deref() == Some(name))
            .count()
    };
    assert_eq!((count("twice"), count("until")), (2, 2));
    for name in ["twice", "until"] {
        let s = store.schedule("acme", name).await.expect("get").expect("s");
        assert_eq!((s.runs, s.next_run_at), (2, None), "{name}");
    }
}

/// A tenant lists, reads and deletes only its own schedules; a name is
/// per tenant; storing a name again replaces it and restarts its runs.
pub async fn tenants_own_their_schedules<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, _clock) = open(f).await;
    let store = AnyStore::from(store);
    for tenant in ["acme", "globex"] {
        let s = NewSchedule::new(tenant, "report", every(60_000), template(tenant));
        store.put_schedule(s).await.expect("put");
    }
    fire(&store).await;
    let acme = store.schedules(Some("acme")).await.expect("list");
    assert_eq!(acme.len(), 1);
    assert_eq!((acme[0].tenant.as_str(), acme[0].runs), ("acme", 1));
    assert_eq!(store.schedules(None).await.expect("all").len(), 2);
    assert!(
        store
            .schedule("globex", "missing")
            .await
            .expect("get")
            .is_none()
    );
    let again = NewSchedule::new("acme", "report", every(30_000), template("acme"));
    let (s, replaced) = store.put_schedule(again).await.expect("put");
    assert!(replaced);
    assert_eq!((s.runs, s.every_ms), (0, Some(30_000)));
    assert!(store.delete_schedule("acme", "report").await.expect("del"));
    assert!(!store.delete_schedule("acme", "report").await.expect("del"));
    assert_eq!(
        store.schedules(Some("globex")).await.expect("list").len(),
        1
    );
    // A schedule's job is its tenant's.
    let wrong = NewSchedule::new("acme", "x", every(1_000), template("globex"));
    assert!(store.put_schedule(wrong).await.is_err());
}

/// A cron schedule fires at its expression's ticks in its time zone.
pub async fn cron_fires_at_its_ticks<F: Factory>(f: &F)
where
    AnyStore: From<F::Store>,
{
    let (store, clock) = open(f).await;
    let store = AnyStore::from(store);
    // T0 is 2023-11-14T22:13:20Z; every 15 minutes in Kolkata (UTC+5:30)
    // falls on :00, :15, :30, :45 UTC too.
    let cron = Cadence::cron("*/15 * * * *", "Asia/Kolkata").expect("cron");
    let s = NewSchedule::new("acme", "quarter", cron, template("acme"));
    let (stored, _) = store.put_schedule(s).await.expect("put");
    let first = Timestamp::from_millis(1_700_000_100_000); // 22:15:00Z
    assert_eq!(stored.next_run_at, Some(first));
    assert!(fire(&store).await.is_empty());
    clock.set(first);
    let fired = fire(&store).await;
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].schedule_tick, Some(first));
    let s = store
        .schedule("acme", "quarter")
        .await
        .expect("get")
        .expect("s");
    assert_eq!(s.next_run_at, Some(first + Duration::from_secs(900)));
}
