//! The store suite: every behaviour of a [`JobStore`], run against each
//! backend by `tests/sqlite.rs` and `tests/postgres.rs` through
//! [`store_tests!`].

#![allow(dead_code)] // each test binary uses all of it, rustc sees it per module

pub mod admin;
pub mod batch;
pub mod cost;
pub mod events;
pub mod fairness;
pub mod flows;
pub mod idempotency;
pub mod leases;
pub mod lifecycle;
pub mod schedules;
pub mod stress;

use std::future::Future;
use std::time::Duration;

use serde_json::json;
use sluice_jobs::{
    AnyStore, Job, JobId, JobState, JobStore, Lease, ManualClock, NewJob, Tally, Timestamp,
};

/// Makes a fresh, empty store that reads time from `clock`.
pub trait Factory: Sync {
    /// The store it makes.
    type Store: JobStore + 'static;
    /// A new store with no jobs.
    fn make(&self, clock: ManualClock) -> impl Future<Output = Self::Store> + Send;
    /// What `store` has asked of its database so far.
    fn tally(store: &Self::Store) -> Tally;
}

/// The stores of factory `F`, held as an [`AnyStore`].
pub struct Any<F>(pub F);

impl<F: Factory> Factory for Any<F>
where
    AnyStore: From<F::Store>,
{
    type Store = AnyStore;

    async fn make(&self, clock: ManualClock) -> AnyStore {
        AnyStore::from(self.0.make(clock).await)
    }

    fn tally(store: &AnyStore) -> Tally {
        store.tally()
    }
}

/// Where every test's clock starts (November 2023).
pub const T0: Timestamp = Timestamp::from_millis(1_700_000_000_000);
/// The lease every test claims with.
pub const LEASE: Duration = Duration::from_secs(30);

/// A fresh store and its clock, standing at [`T0`].
pub async fn open<F: Factory>(f: &F) -> (F::Store, ManualClock) {
    let clock = ManualClock::new(T0);
    (f.make(clock.clone()).await, clock)
}

/// A job of kind `test.noop` on `queue`.
pub fn job(queue: &str) -> NewJob {
    NewJob::new(queue, "test.noop", json!({"n": 1}))
}

/// Enqueues `new` and returns the stored job.
pub async fn enqueue(store: &impl JobStore, new: NewJob) -> Job {
    store.enqueue(new).await.expect("enqueue").job
}

/// Claims up to `n` jobs of `queue` for `worker` with [`LEASE`].
pub async fn claim(store: &impl JobStore, queue: &str, worker: &str, n: u32) -> Vec<Job> {
    store.claim(queue, worker, n, LEASE).await.expect("claim")
}

/// Claims exactly one job and returns it with its lease.
pub async fn claim_one(store: &impl JobStore, queue: &str, worker: &str) -> (Job, Lease) {
    let mut jobs = claim(store, queue, worker, 1).await;
    assert_eq!(jobs.len(), 1, "expected a due job in {queue}");
    let job = jobs.remove(0);
    let lease = job.lease.clone().expect("a claimed job is leased");
    (job, lease)
}

/// The state of job `id`, which must exist.
pub async fn state(store: &impl JobStore, id: JobId) -> JobState {
    store
        .get(id)
        .await
        .expect("get")
        .expect("the job exists")
        .state
}

/// Runs every test of the suite as a `#[tokio::test]` on the stores that
/// `$factory` makes.
macro_rules! store_tests {
    ($factory:expr) => {
        $crate::suite::store_tests!(@each $factory;
            lifecycle::enqueue_then_get,
            lifecycle::delayed_job_waits_for_run_at,
            lifecycle::complete_keeps_the_result,
            lifecycle::retries_use_attempts_then_die,
            lifecycle::reschedule_keeps_attempts,
            lifecycle::dead_decision_skips_retries,
            lifecycle::cancel_guards_states,
            batch::batch_is_atomic,
            batch::list_pages_by_cursor,
            batch::list_filters_by_tenant,
            leases::heartbeat_extends_the_lease,
            leases::heartbeat_many_guards_each_lease,
            leases::expired_lease_is_rescued_and_old_worker_refused,
            leases::rescue_never_takes_a_live_lease,
            leases::rescue_of_last_attempt_is_dead,
            leases::reclaim_by_same_worker_gets_new_lease,
            leases::late_completion_before_rescue_is_accepted,
            leases::unknown_job_is_not_found,
            leases::complete_many_guards_each_lease,
            leases::complete_many_ids_guards_each_lease,
            leases::complete_many_of_many_jobs,
            leases::fail_many_guards_each_lease,
            leases::errors_with_nul_bytes_fail_no_batch,
            idempotency::duplicate_returns_the_original,
            idempotency::keys_are_per_tenant,
            idempotency::key_expires_after_ttl,
            idempotency::duplicate_within_a_batch,
            idempotency::large_batch_with_keys,
            idempotency::concurrent_enqueues_with_one_key,
            fairness::groups_take_turns,
            fairness::one_claim_spreads_across_groups,
            fairness::priority_orders_a_group,
            fairness::one_group_claims_by_priority_then_age,
            fairness::paused_queue_gives_nothing,
            fairness::tenants_take_turns_in_a_shared_group_name,
            fairness::many_groups_share_one_tenant_turn,
            fairness::future_jobs_stay_out_of_the_claims_way,
            fairness::claims_match_the_ranking_of_the_whole_backlog,
            admin::retry_from_dead,
            admin::retry_all_dead_of_a_queue,
            admin::purge_removes_only_dead,
            admin::counts_by_queue_and_state,
            admin::counts_match_the_jobs_in_every_state,
            admin::retention_deletes_old_finished_jobs,
            admin::retention_keeps_jobs_with_live_keys,
            stress::concurrent_claimers_never_share_a_job,
            cost::a_cycle_costs_the_same_for_any_number_of_jobs,
            schedules::every_tick_fires_once_across_callers,
            schedules::missed_ticks_fire_once,
            schedules::limit_and_end_at_end_a_schedule,
            schedules::tenants_own_their_schedules,
            schedules::cron_fires_at_its_ticks,
            events::every_change_is_an_event,
            events::a_timeline_is_the_jobs_stream,
            flows::the_parent_runs_after_its_children,
            flows::a_failed_child_fails_or_is_ignored,
            flows::nested_flows_wait_and_cancel_down,
        );
    };
    (@each $factory:expr; $($module:ident :: $test:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                $crate::suite::$module::$test(&$factory).await;
            }
        )*
    };
}
pub(crate) use store_tests;
