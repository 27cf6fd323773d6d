//! The worker pool: a claim loop per queue, the rescuer and the cleaner,
//! and graceful shutdown.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_limit::Limit;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::job::{Job, Lease};
use crate::metrics;
use crate::store::JobStore;
use crate::worker::backoff::Backoff;
use crate::worker::batch::Completer;
use crate::worker::config::{PoolConfig, QueueConfig};
use crate::worker::handler::Handlers;
use crate::worker::health::StoreHealth;
use crate::worker::heartbeat::{self, Heartbeats};
use crate::worker::run::{Claimed, Slot, give_back_unstarted, run_job};
use crate::worker::wake::{QueueWake, Wakes};
use sluice_limit::SharedLimiter;

/// Group rate resources a pool configures at most before it drops the
/// idle ones: groups are user-chosen, so their number is not bounded.
const MAX_GROUP_RESOURCES: usize = 4_096;
/// How long a claim waits, once some room is free, for more to free up.
const CLAIM_LINGER: Duration = Duration::from_millis(1);
/// How long shutdown waits, after its deadline, for halted jobs to be
/// given back to the store.
const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// What every task of a pool shares.
pub(crate) struct Ctx<S> {
    pub store: Arc<S>,
    pub limiter: SharedLimiter,
    pub handlers: Handlers,
    pub config: PoolConfig,
    /// Turns true at shutdown's deadline: running jobs are given back.
    pub halt: watch::Receiver<bool>,
    pub groups: GroupLimits,
    pub stats: Stats,
    /// Per queue: wake its claim loop before the next poll.
    pub wakes: Arc<Wakes>,
    /// Where runs record their completions, batched.
    pub completer: Completer,
    /// The leases of running jobs, renewed together.
    pub heartbeats: Arc<Heartbeats>,
    /// Whether the store was found damaged: then nothing more is claimed.
    pub health: StoreHealth,
    rng: Mutex<fastrand::Rng>,
}

impl<S> Ctx<S> {
    /// Wakes `queue`'s claim loop in `after` (a retry falls due).
    pub fn wake_after(&self, queue: &str, after: Duration) {
        if let Some(w) = self.wakes.get(queue) {
            w.after(after);
        }
    }

    /// A backoff wait after `failures` failed attempts.
    pub fn backoff(&self, failures: u32) -> Duration {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        self.config.backoff.wait(failures, &mut rng)
    }
}

/// Counts of what a pool's runs ended in.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    pub dead: AtomicU64,
    pub released: AtomicU64,
}

/// The group rate resources a pool has configured on the limiter.
#[derive(Debug, Default)]
pub(crate) struct GroupLimits {
    configured: Mutex<HashSet<String>>,
}

impl GroupLimits {
    /// Configures `resource` with `limit` unless it already is.
    pub fn ensure(&self, limiter: &SharedLimiter, resource: &str, limit: Limit) {
        let mut set = self.configured.lock().unwrap_or_else(|p| p.into_inner());
        if set.contains(resource) && limiter.contains(resource) {
            return;
        }
        if set.len() >= MAX_GROUP_RESOURCES {
            // Drop the groups nobody holds or waits on: a dropped one is
            // configured again, full, on its next use, which at worst lets
            // one burst through early.
            set.retain(|r| !limiter.remove_idle(r));
        }
        if let Err(e) = limiter.set_limit(resource, limit) {
            tracing::warn!(resource, error = %e, "jobs: cannot configure a group rate");
        }
        set.insert(resource.to_owned());
    }
}

/// Runs jobs from a [`JobStore`] with the handlers of their kinds, under a
/// shared limiter ([`SharedLimiter`]). Built by [`WorkerPool::builder`].
///
/// Dropping the pool stops every task at once, leaving the running jobs'
/// leases to expire (as a crash would); [`shutdown`](Self::shutdown) is
/// the graceful way.
#[derive(Debug)]
pub struct WorkerPool {
    stop: watch::Sender<bool>,
    halt: watch::Sender<bool>,
    queues: Vec<AbortOnDrop>,
    maintenance: Vec<AbortOnDrop>,
    stats: Arc<dyn StatsView>,
    wakes: Arc<Wakes>,
    worker_id: String,
    health: StoreHealth,
}

/// How a [`WorkerPool::shutdown`] went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Jobs completed over the pool's life.
    pub completed: u64,
    /// Failed runs over the pool's life (retried, rescheduled or dead).
    pub failed: u64,
    /// Runs that ended with the job dead.
    pub dead: u64,
    /// Jobs still running at the deadline, given back without using an attempt.
    pub released: u64,
}

trait StatsView: Send + Sync + std::fmt::Debug {
    fn report(&self) -> ShutdownReport;
}

impl<S: Send + Sync> StatsView for Ctx<S> {
    fn report(&self) -> ShutdownReport {
        ShutdownReport {
            completed: self.stats.completed.load(Ordering::Relaxed),
            failed: self.stats.failed.load(Ordering::Relaxed),
            dead: self.stats.dead.load(Ordering::Relaxed),
            released: self.stats.released.load(Ordering::Relaxed),
        }
    }
}

impl<S> std::fmt::Debug for Ctx<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("handlers", &self.handlers)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct AbortOnDrop(Option<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

impl WorkerPool {
    /// A builder for a pool on `store` whose rates go through `limiter`
    /// (share the gateway's, so that jobs and interactive traffic take from
    /// the same buckets): a [`sluice_limit::Limiter`], or any
    /// [`RateLimiter`](sluice_limit::RateLimiter) as a [`SharedLimiter`] (the gateway's
    /// Redis-backed limits in distributed mode).
    pub fn builder<S: JobStore + 'static>(
        store: Arc<S>,
        limiter: impl Into<SharedLimiter>,
    ) -> WorkerPoolBuilder<S> {
        WorkerPoolBuilder {
            store,
            limiter: limiter.into(),
            handlers: Handlers::new(),
            queues: Vec::new(),
            config: PoolConfig::default(),
            health: StoreHealth::new(),
        }
    }

    /// The worker id this pool claims under.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// Tells `queue`'s claim loop to claim now rather than at its next
    /// poll: call it after enqueueing a job that is due at once. A queue
    /// this pool does not work is ignored.
    pub fn notify(&self, queue: &str) {
        if let Some(w) = self.wakes.get(queue) {
            w.now();
        }
    }

    /// Whether the pool found its store damaged (and stopped claiming).
    pub fn health(&self) -> &StoreHealth {
        &self.health
    }

    /// What the pool's runs ended in so far.
    pub fn report(&self) -> ShutdownReport {
        self.stats.report()
    }

    /// Stops claiming, lets running jobs finish until `grace` has passed,
    /// then gives the rest back to the store with no attempt used (they
    /// are rescheduled to run at once, which counts in their
    /// `reschedules`) and stops the rescuer and the cleaner.
    pub async fn shutdown(mut self, grace: Duration) -> ShutdownReport {
        self.stop.send_replace(true);
        let deadline = tokio::time::Instant::now() + grace;
        let mut queues: Vec<JoinHandle<()>> =
            self.queues.iter_mut().filter_map(|t| t.0.take()).collect();
        for task in &mut queues {
            if tokio::time::timeout_at(deadline, &mut *task).await.is_err() {
                break;
            }
        }
        // Whatever still runs is past the deadline: halt and give back.
        self.halt.send_replace(true);
        let release_by = tokio::time::Instant::now() + RELEASE_GRACE;
        for task in &mut queues {
            if !task.is_finished()
                && tokio::time::timeout_at(release_by, &mut *task)
                    .await
                    .is_err()
            {
                task.abort();
            }
        }
        self.maintenance.clear();
        self.stats.report()
    }
}

/// Builds a [`WorkerPool`].
#[derive(Debug)]
pub struct WorkerPoolBuilder<S> {
    store: Arc<S>,
    limiter: SharedLimiter,
    handlers: Handlers,
    queues: Vec<QueueConfig>,
    config: PoolConfig,
    health: StoreHealth,
}

impl<S: JobStore + 'static> WorkerPoolBuilder<S> {
    /// Reports the store's damage to `health` (shared with whoever
    /// reports readiness) rather than to one of the pool's own.
    #[must_use]
    pub fn health(mut self, health: StoreHealth) -> Self {
        self.health = health;
        self
    }

    /// Runs jobs with these handlers (added to earlier ones).
    #[must_use]
    pub fn handlers(mut self, handlers: Handlers) -> Self {
        self.handlers = self.handlers.merge(handlers);
        self
    }

    /// Works this queue (replacing an earlier config of the same name).
    #[must_use]
    pub fn queue(mut self, queue: QueueConfig) -> Self {
        self.queues.retain(|q| q.name != queue.name);
        self.queues.push(queue);
        self
    }

    /// Replaces the pool's timings.
    #[must_use]
    pub fn config(mut self, config: PoolConfig) -> Self {
        self.config = config;
        self
    }

    /// Edits the pool's timings.
    #[must_use]
    pub fn configure(mut self, f: impl FnOnce(&mut PoolConfig)) -> Self {
        f(&mut self.config);
        self
    }

    /// Sets the retry backoff.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.config.backoff = backoff;
        self
    }

    /// Configures the queues' rates on the limiter and starts claiming.
    /// Must be called within a tokio runtime.
    ///
    /// # Errors
    /// [`sluice_limit::Error`] if a queue's rate is invalid or the limiter
    /// is closed.
    pub fn start(self) -> Result<WorkerPool, sluice_limit::Error> {
        for queue in &self.queues {
            if let Some(limit) = queue.rate {
                self.limiter.set_limit(&queue.rate_resource(), limit)?;
            }
            if let Some(limit) = queue.group_rate {
                limit.validate()?;
            }
        }
        let (stop, stop_rx) = watch::channel(false);
        let (halt, halt_rx) = watch::channel(false);
        let worker_id = self.config.worker_id.clone();
        let health = self.health.clone();
        let wakes: Arc<Wakes> = Arc::new(
            self.queues
                .iter()
                .map(|q| (q.name.clone(), Arc::new(QueueWake::default())))
                .collect(),
        );
        let (completer, batcher) = Completer::start(Arc::clone(&self.store));
        let ctx = Arc::new(Ctx {
            wakes: Arc::clone(&wakes),
            completer,
            heartbeats: Arc::default(),
            health: self.health,
            store: self.store,
            limiter: self.limiter,
            handlers: self.handlers,
            config: self.config,
            halt: halt_rx,
            groups: GroupLimits::default(),
            stats: Stats::default(),
            rng: Mutex::new(fastrand::Rng::new()),
        });
        let queues = self
            .queues
            .into_iter()
            .map(|q| {
                let task = tokio::spawn(claim_loop(Arc::clone(&ctx), Arc::new(q), stop_rx.clone()));
                AbortOnDrop(Some(task))
            })
            .collect();
        let beats = heartbeat::run(
            Arc::clone(&ctx.heartbeats),
            Arc::clone(&ctx.store),
            ctx.config.heartbeat,
            ctx.config.lease,
        );
        let mut maintenance = vec![
            AbortOnDrop(Some(batcher)),
            AbortOnDrop(Some(tokio::spawn(beats))),
        ];
        if let Some(every) = ctx.config.rescue_every {
            maintenance.push(AbortOnDrop(Some(tokio::spawn(rescuer(
                Arc::clone(&ctx),
                every,
            )))));
        }
        if let Some(every) = ctx.config.cleanup_every {
            maintenance.push(AbortOnDrop(Some(tokio::spawn(cleaner(
                Arc::clone(&ctx),
                every,
            )))));
        }
        Ok(WorkerPool {
            stop,
            halt,
            queues,
            maintenance,
            stats: ctx,
            wakes,
            worker_id,
            health,
        })
    }
}

/// Works one queue: a claimer task claims jobs ahead of the queue's free
/// slots, as far as its prefetch allows, and this task starts them in
/// claim order as slots free up, until told to stop; then it starts
/// what was claimed and finds a free slot, gives back the rest, and waits
/// for the running jobs (which shutdown may halt).
///
/// Three bounds: `slots` (the queue's concurrency) are the runs started
/// whose handlers have not returned; `awaiting` the outcomes handed to the
/// batcher and not yet committed (a run whose handler returned trades its
/// slot for one of these, so jobs run while a batch commits); `room`
/// (concurrency + prefetch) the jobs claimed whose handlers have not
/// returned. So when handlers return, the jobs claimed ahead start at
/// once while the next claim is made, and the runs a crash could repeat
/// are at most `slots` + `awaiting`.
async fn claim_loop<S: JobStore + 'static>(
    ctx: Arc<Ctx<S>>,
    queue: Arc<QueueConfig>,
    mut stop: watch::Receiver<bool>,
) {
    let concurrency = queue.concurrency.get();
    let slots = Arc::new(Semaphore::new(concurrency));
    let awaiting = match queue.uncommitted() {
        0 => None,
        n => Some(Arc::new(Semaphore::new(n))),
    };
    let to_slot = |permit| Slot {
        permit,
        awaiting: awaiting.clone(),
    };
    let room = Arc::new(Semaphore::new(concurrency + queue.ahead()));
    let (claimed, mut next) = mpsc::unbounded_channel();
    let claims = claimer(
        Arc::clone(&ctx),
        Arc::clone(&queue),
        stop.clone(),
        room,
        claimed,
    );
    // Owned here: aborting this task (the pool dropped) aborts the
    // claimer and every run.
    let mut claimer = AbortOnDrop(Some(tokio::spawn(claims)));
    let mut running = JoinSet::new();
    let mut unstarted = Vec::new();
    loop {
        while running.try_join_next().is_some() {}
        // What is at hand is taken without waiting (a wait registers with
        // the stop signal and the channel or semaphore, twice a job); the
        // stop signal is still looked at first, as the waits below do.
        if *stop.borrow() {
            break;
        }
        let job = match next.try_recv() {
            Ok(job) => job,
            Err(_) => tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                job = next.recv() => match job {
                    Some(job) => job,
                    None => break,
                },
            },
        };
        if *stop.borrow() {
            unstarted.push(job);
            break;
        }
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => Ok(permit),
            Err(_) => tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => {
                    unstarted.push(job);
                    break;
                }
                slot = Arc::clone(&slots).acquire_owned() => slot,
            },
        };
        let (Ok(permit), (job, lease, claimed)) = (slot, job) else {
            break;
        };
        if ctx.health.is_damaged() {
            // Claimed before the damage was found: not started, left to
            // its lease (a run whose outcome cannot be recorded would
            // only run again).
            drop((job, lease, claimed, permit));
            continue;
        }
        running.spawn(run_job(
            Arc::clone(&ctx),
            Arc::clone(&queue),
            job,
            lease,
            claimed,
            to_slot(permit),
        ));
    }
    // The claimer stops after the claim it may be making: then every job
    // it claimed is in the channel.
    if let Some(task) = claimer.0.take() {
        let _ = task.await;
    }
    while let Ok(job) = next.try_recv() {
        unstarted.push(job);
    }
    // Claimed and not started: those that find a free slot run within
    // the grace period like the others, the rest go back at once.
    for (job, lease, claimed) in unstarted {
        let ctx = Arc::clone(&ctx);
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => running.spawn(run_job(
                ctx,
                Arc::clone(&queue),
                job,
                lease,
                claimed,
                to_slot(permit),
            )),
            Err(_) => running.spawn(give_back_unstarted(ctx, job, lease, claimed)),
        };
    }
    while running.join_next().await.is_some() {}
}

/// A job claimed and not yet started, with what it holds.
type Waiting = (Job, Lease, Claimed);

/// Claims jobs of `queue` while there is room, and sends them in claim
/// order (the tenants' and groups' turns) to be started; polls an idle
/// queue. Stops, between claims, once told to.
async fn claimer<S: JobStore + 'static>(
    ctx: Arc<Ctx<S>>,
    queue: Arc<QueueConfig>,
    mut stop: watch::Receiver<bool>,
    room: Arc<Semaphore>,
    claimed: mpsc::UnboundedSender<Waiting>,
) {
    let capacity = queue.concurrency.get() + queue.ahead();
    let wake = ctx.wakes.get(&queue.name).cloned().unwrap_or_default();
    loop {
        if ctx.health.is_damaged() {
            // Claim nothing more; wait to be stopped.
            let _ = stop.wait_for(|s| *s).await;
            break;
        }
        let first = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            first = Arc::clone(&room).acquire_owned() => match first {
                Ok(first) => first,
                Err(_) => break,
            },
        };
        // Room frees up in bursts (a batch of outcomes commits, and the
        // runs that waited for it hand theirs over and free their room
        // one by one): let the rest of the burst land, for up to
        // `CLAIM_LINGER`, so that one claim fills it all instead of
        // several claims of a few jobs each.
        let places = gather(&room, first, capacity, CLAIM_LINGER).await;
        let n = u32::try_from(places.len()).unwrap_or(u32::MAX);
        let jobs = match ctx
            .store
            .claim(&queue.name, &ctx.config.worker_id, n, ctx.config.lease)
            .await
        {
            Ok(jobs) => jobs,
            Err(e) => {
                if !ctx.health.observe(&e) {
                    tracing::warn!(queue = %queue.name, error = %e, "jobs: claim failed");
                }
                Vec::new()
            }
        };
        if jobs.is_empty() {
            drop(places);
            let now = tokio::time::Instant::now();
            // A retry this pool scheduled may fall due before the next poll.
            if let Some(at) = wake.next(now, now + ctx.config.poll) {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|s| *s) => break,
                    _ = tokio::time::sleep_until(at) => {}
                    _ = wake.notified() => {}
                }
            }
            continue;
        }
        for (job, room) in jobs.into_iter().zip(places) {
            let Some(lease) = job.lease.clone() else {
                tracing::error!(job = %job.id, "claimed job has no lease; leaving it to the rescuer");
                continue;
            };
            // Renewed from the claim on, while it waits for a slot too.
            let held = ctx.heartbeats.hold(&lease);
            let waiting = Claimed { held, room };
            if claimed.send((job, lease, waiting)).is_err() {
                return;
            }
        }
    }
}

/// The places of `room` for one claim: `first`, what is free, and what
/// frees up within `linger` until there are `capacity`, one permit each.
/// Only the claimer takes room.
async fn gather(
    room: &Arc<Semaphore>,
    first: OwnedSemaphorePermit,
    capacity: usize,
    linger: Duration,
) -> Vec<OwnedSemaphorePermit> {
    let mut places = vec![first];
    take_free(room, &mut places);
    let want = capacity.saturating_sub(places.len());
    if want > 0 {
        // One wait for all the rest, which wakes this task once (all of
        // it free, or the time is up), not once a place. The places a
        // timed-out wait had gathered go back to the semaphore and are
        // taken just below.
        let until = tokio::time::Instant::now() + linger;
        let rest = u32::try_from(want).unwrap_or(u32::MAX);
        let wait = Arc::clone(room).acquire_many_owned(rest);
        if let Ok(Ok(mut rest)) = tokio::time::timeout_at(until, wait).await {
            while rest.num_permits() > 1 {
                places.extend(rest.split(1));
            }
            places.push(rest);
        }
        take_free(room, &mut places);
    }
    places
}

/// Adds to `places` every place of `room` free now, one permit each.
fn take_free(room: &Arc<Semaphore>, places: &mut Vec<OwnedSemaphorePermit>) {
    while let Ok(place) = Arc::clone(room).try_acquire_owned() {
        places.push(place);
    }
}

/// Takes back jobs whose lease expired (their worker died).
async fn rescuer<S: JobStore>(ctx: Arc<Ctx<S>>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match ctx.store.rescue().await {
            Ok(jobs) => {
                for job in jobs {
                    tracing::warn!(job = %job.id, queue = %job.queue, kind = %job.kind, state = %job.state, "jobs: rescued a job whose lease expired");
                    metrics::failed(&job.queue, &job.kind, "rescued");
                }
            }
            Err(e) => {
                if !ctx.health.observe(&e) {
                    tracing::warn!(error = %e, "jobs: rescue failed");
                }
            }
        }
    }
}

/// Deletes finished jobs past their retention.
async fn cleaner<S: JobStore>(ctx: Arc<Ctx<S>>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match ctx.store.cleanup(&ctx.config.retention).await {
            Ok(cleaned) => tracing::debug!(?cleaned, "jobs: cleaned up"),
            Err(e) => tracing::warn!(error = %e, "jobs: cleanup failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frees the places in `held`, one every `every`.
    fn free_one_by_one(mut held: Vec<OwnedSemaphorePermit>, every: Duration) -> JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(place) = held.pop() {
                tokio::time::sleep(every).await;
                drop(place);
            }
        })
    }

    fn hold(room: &Arc<Semaphore>, n: usize) -> Vec<OwnedSemaphorePermit> {
        (0..n)
            .map(|_| Arc::clone(room).try_acquire_owned().unwrap())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_takes_the_places_that_free_up_while_it_waits() {
        let room = Arc::new(Semaphore::new(10));
        let first = Arc::clone(&room).try_acquire_owned().unwrap();
        let free_now = hold(&room, 2);
        let held = hold(&room, 7);
        drop(free_now);
        // 7 more free up one by one within the wait.
        // (Tokio's timers count whole milliseconds: times here are larger.)
        let freeing = free_one_by_one(held, Duration::from_millis(5));
        let places = gather(&room, first, 10, Duration::from_millis(100)).await;
        assert_eq!(places.len(), 10);
        assert!(places.iter().all(|p| p.num_permits() == 1));
        assert_eq!(room.available_permits(), 0);
        freeing.await.unwrap();
        drop(places);
        assert_eq!(room.available_permits(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_whose_wait_ends_takes_what_freed_up_meanwhile() {
        let room = Arc::new(Semaphore::new(10));
        let first = Arc::clone(&room).try_acquire_owned().unwrap();
        let mut held = hold(&room, 9);
        // 3 free up within the wait, the other 6 after it.
        let late = held.split_off(3);
        let freeing = free_one_by_one(held, Duration::from_millis(10));
        let places = gather(&room, first, 10, Duration::from_millis(50)).await;
        assert_eq!(places.len(), 4, "the first and the 3 freed within the wait");
        assert!(places.iter().all(|p| p.num_permits() == 1));
        assert_eq!(room.available_permits(), 0, "none left behind");
        freeing.await.unwrap();
        drop((places, late));
        assert_eq!(room.available_permits(), 10);
    }

    #[tokio::test(start_paused = true)]
    async fn a_claim_with_its_room_all_free_does_not_wait() {
        let room = Arc::new(Semaphore::new(5));
        let first = Arc::clone(&room).try_acquire_owned().unwrap();
        let before = tokio::time::Instant::now();
        let places = gather(&room, first, 5, Duration::from_secs(60)).await;
        assert_eq!(places.len(), 5);
        assert_eq!(tokio::time::Instant::now(), before);
    }
}
