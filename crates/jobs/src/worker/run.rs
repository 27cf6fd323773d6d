//! One job's run: wait for its rate, keep its lease alive, run its
//! handler (catching panics), and record what happened.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::Error;
use crate::job::{Job, JobState, Lease};
use crate::metrics;
use crate::store::{JobStore, RetryDecision};
use crate::worker::config::QueueConfig;
use crate::worker::handler::Outcome;
use crate::worker::health::StoreHealth;
use crate::worker::heartbeat::Held;
use crate::worker::pool::Ctx;
use crate::worker::progress;

/// A handler's run with its panic caught: `Err` with the panic's message
/// instead of unwinding through the worker. It is polled in the run's own
/// task (a task of its own for the handler would cost a spawn and a
/// wakeup a job), so dropping the run (the pool dropped) drops it too.
async fn catch_panic<F: Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(&*payload))),
        }
    })
    .await
}

/// What a caught panic says.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_owned());
    format!("handler panicked: {msg}")
}

/// How a future driven under a lease ended.
enum Driven<T> {
    Done(T),
    /// The lease is gone (rescued, cancelled): stop, record nothing.
    Lost,
    /// Shutdown's deadline passed: give the job back.
    Halted,
}

/// What a claimed job holds from its claim until its outcome is recorded.
pub(crate) struct Claimed {
    /// Its lease, renewed by the pool's heartbeat.
    pub held: Held,
    /// Its place among the queue's jobs claimed and not yet recorded.
    pub room: OwnedSemaphorePermit,
}

/// A run's place in its queue's concurrency, and where its outcome may
/// wait for its commit once the handler has returned.
pub(crate) struct Slot {
    pub permit: OwnedSemaphorePermit,
    /// Places of the outcomes awaiting their commit
    /// ([`QueueConfig::awaiting_commit`]); `None` keeps the slot until then.
    pub awaiting: Option<Arc<Semaphore>>,
}

impl Slot {
    /// Trades the slot for a place among the outcomes awaiting their
    /// commit, once one is free (the slot is held meanwhile, so a pool
    /// whose commits fall behind stops starting jobs); without such
    /// places, keeps the slot. Hold what it returns until the outcome is
    /// recorded.
    async fn hand_over(self) -> OwnedSemaphorePermit {
        match self.awaiting {
            Some(places) => match places.acquire_owned().await {
                Ok(place) => place,
                Err(_) => self.permit,
            },
            None => self.permit,
        }
    }
}

/// What records the run's progress: the store, under the run's lease.
fn reporter<S: JobStore + 'static>(ctx: &Arc<Ctx<S>>, lease: &Lease) -> progress::Reporter {
    let store = Arc::clone(&ctx.store);
    let (reader, id) = (Arc::clone(&ctx.store), lease.job);
    let lease = lease.clone();
    progress::Reporter(
        Arc::new(move |value| {
            let (store, lease) = (Arc::clone(&store), lease.clone());
            Box::pin(async move { store.progress(&lease, value).await.map(|_| ()) })
        }),
        Arc::new(move || {
            let store = Arc::clone(&reader);
            Box::pin(async move { store.children(id).await })
        }),
    )
}

/// Runs one claimed job, holding its `slot` while it waits for its rate
/// and runs, then a place among the outcomes awaiting their commit (or
/// the slot) until its outcome is recorded.
pub(crate) async fn run_job<S: JobStore + 'static>(
    ctx: Arc<Ctx<S>>,
    queue: Arc<QueueConfig>,
    job: Job,
    lease: Lease,
    claimed: Claimed,
    slot: Slot,
) {
    let Claimed { mut held, room } = claimed;

    // Wait for the queue's (and the group's) rate, holding the lease.
    let needs = rate_needs(&ctx, &queue, &job);
    if !needs.is_empty() {
        let pairs: Vec<(&str, u64)> = needs.iter().map(|r| (r.as_str(), 1)).collect();
        let granted = match ctx.limiter.try_acquire_many(&pairs).await {
            Ok(grant) => Ok(grant),
            Err(sluice_limit::Error::RateLimited { .. }) => {
                metrics::rate_limit_wait(&queue.name);
                match drive(&ctx, &mut held, ctx.limiter.acquire_many(&pairs, None)).await {
                    Driven::Done(r) => r,
                    Driven::Lost => return lost(&job),
                    Driven::Halted => return release(&ctx, &job, &lease).await,
                }
            }
            Err(e) => Err(e),
        };
        if let Err(e) = granted {
            // The limiter is closing or misconfigured: not the job's fault.
            tracing::warn!(job = %job.id, error = %e, "jobs: rate limiter refused; giving the job back");
            // In a second, so that a closing limiter is not spun on.
            return give_back(
                &ctx,
                &job,
                &lease,
                Duration::from_secs(1),
                "rate limiter refused",
            )
            .await;
        }
    }

    let started = ctx.config.clock.now();
    metrics::wait(&queue.name, started.since(job.run_at));
    let begin = tokio::time::Instant::now();
    let outcome = match ctx.handlers.get(&job.kind) {
        None => Outcome::Fatal(format!(
            "no handler for kind {:?} (this worker runs: {})",
            job.kind,
            ctx.handlers.kinds().join(", ")
        )),
        Some(handler) => {
            let reporter = reporter(&ctx, &lease);
            let run = catch_panic(progress::scoped(reporter, handler.run(&job)));
            match drive(&ctx, &mut held, run).await {
                Driven::Done(Ok(outcome)) => outcome,
                Driven::Done(Err(panic)) => Outcome::retry(panic),
                Driven::Lost => return lost(&job),
                Driven::Halted => return release(&ctx, &job, &lease).await,
            }
        }
    };
    metrics::duration(&queue.name, &job.kind, begin.elapsed());
    // The handler is done: its slot and its room go to the next jobs
    // while the outcome waits for its batch's commit, so that jobs run
    // during the commit instead of after it. The lease stays held (and
    // renewed) until the outcome is durable: a crash before that runs the
    // job again once the lease expires.
    let _place = slot.hand_over().await;
    drop(room);
    record(&ctx, &job, &lease, outcome).await;
}

/// Gives back, at shutdown, a job claimed ahead that never started.
pub(crate) async fn give_back_unstarted<S: JobStore>(
    ctx: Arc<Ctx<S>>,
    job: Job,
    lease: Lease,
    claimed: Claimed,
) {
    release(&ctx, &job, &lease).await;
    drop(claimed);
}

/// The limiter resources a run of `job` needs, configuring its group's
/// resource on first use.
fn rate_needs<S>(ctx: &Ctx<S>, queue: &QueueConfig, job: &Job) -> Vec<String> {
    // Empty (no allocation) for a queue without rates.
    let mut needs = Vec::new();
    if queue.rate.is_some() {
        needs.push(queue.rate_resource());
    }
    if let Some(limit) = queue.group_rate {
        let resource = queue.group_resource(&job.tenant, &job.group);
        ctx.groups.ensure(&ctx.limiter, &resource, limit);
        needs.push(resource);
    }
    needs
}

/// Drives `fut` while the pool's heartbeat keeps `held` alive, until it
/// ends, the lease is lost, or shutdown halts running jobs.
async fn drive<S, F: Future>(ctx: &Ctx<S>, held: &mut Held, fut: F) -> Driven<F::Output> {
    let mut halt = ctx.halt.clone();
    let mut fut = std::pin::pin!(fut);
    loop {
        if *halt.borrow_and_update() {
            return Driven::Halted;
        }
        tokio::select! {
            // The run first: one that ends at once (most do) never
            // registers with the lease's and the halt's signals.
            biased;
            out = &mut fut => return Driven::Done(out),
            () = held.lost() => return Driven::Lost,
            changed = halt.changed() => {
                if changed.is_err() {
                    // The pool is gone: as good as halted.
                    return Driven::Halted;
                }
            }
        }
    }
}

fn lost(job: &Job) {
    tracing::warn!(job = %job.id, kind = %job.kind, "jobs: lease lost (rescued or cancelled); the run's outcome is dropped");
}

/// Gives a job back at shutdown without using an attempt.
async fn release<S: JobStore>(ctx: &Ctx<S>, job: &Job, lease: &Lease) {
    let error = "released at worker shutdown before it finished";
    give_back(ctx, job, lease, Duration::ZERO, error).await;
}

/// Gives a job back to run again in `after`, without using an attempt.
async fn give_back<S: JobStore>(
    ctx: &Ctx<S>,
    job: &Job,
    lease: &Lease,
    after: Duration,
    error: &str,
) {
    let now = ctx.config.clock.now();
    let decision = RetryDecision::RescheduleAt(now + after);
    if persist(&ctx.health, lease, || {
        ctx.completer
            .fail(lease.clone(), error.to_owned(), decision)
    })
    .await
    .is_some()
    {
        ctx.stats.released.fetch_add(1, Ordering::Relaxed);
        metrics::failed(&job.queue, &job.kind, "released");
    }
}

/// Stores the outcome of a run.
async fn record<S: JobStore>(ctx: &Ctx<S>, job: &Job, lease: &Lease, outcome: Outcome) {
    let now = ctx.config.clock.now();
    let (queue, kind) = (job.queue.as_str(), job.kind.as_str());
    let (error, decision, reason) = match outcome {
        Outcome::Completed(result) => {
            if persist(&ctx.health, lease, || {
                ctx.completer.complete(lease.clone(), result.clone())
            })
            .await
            .is_some()
            {
                ctx.stats.completed.fetch_add(1, Ordering::Relaxed);
                metrics::completed(queue, kind);
            }
            return;
        }
        Outcome::Retry { error, retry_after } => {
            let wait = retry_after.unwrap_or_else(|| ctx.backoff(job.attempts + 1));
            (error, RetryDecision::RetryAt(now + wait), "retry")
        }
        Outcome::Throttled { error, retry_after } => {
            let wait = retry_after.unwrap_or_else(|| ctx.backoff(1));
            // Each attempt allows `max_throttles` throttles in a row; the
            // next one uses the attempt, so a job throttled for ever still
            // ends (dead) instead of looping.
            let budget = u64::from(ctx.config.max_throttles) * (u64::from(job.attempts) + 1);
            if u64::from(job.reschedules) >= budget {
                (error, RetryDecision::RetryAt(now + wait), "retry")
            } else {
                (error, RetryDecision::RescheduleAt(now + wait), "throttled")
            }
        }
        Outcome::Fatal(error) => (error, RetryDecision::Dead, "dead"),
    };
    if let Some(after) = persist(&ctx.health, lease, || {
        ctx.completer.fail(lease.clone(), error.clone(), decision)
    })
    .await
    {
        if let RetryDecision::RetryAt(t) | RetryDecision::RescheduleAt(t) = decision
            && after.state != JobState::Dead
        {
            ctx.wake_after(queue, t.since(now));
        }
        let reason = if after.state == JobState::Dead {
            ctx.stats.dead.fetch_add(1, Ordering::Relaxed);
            "dead"
        } else {
            reason
        };
        ctx.stats.failed.fetch_add(1, Ordering::Relaxed);
        metrics::failed(queue, kind, reason);
    }
}

/// Runs a store call on the lease, trying a failing database a few times:
/// giving up leaves the job running until its lease expires and the
/// rescuer takes it back, so it is never lost.
async fn persist<T, F, Fut>(health: &StoreHealth, lease: &Lease, call: F) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    for attempt in 1..=3_u32 {
        match call().await {
            Ok(job) => return Some(job),
            Err(e @ (Error::LeaseLost(_) | Error::NotFound(_))) => {
                tracing::warn!(job = %lease.job, error = %e, "jobs: outcome not recorded");
                return None;
            }
            Err(e) if health.observe(&e) => {
                // A damaged file fails the same way on every try; the
                // pool has stopped claiming, so the job is not run again
                // here once its lease expires.
                tracing::warn!(job = %lease.job, error = %e, "jobs: outcome not recorded: the job store is damaged");
                return None;
            }
            Err(e) => {
                tracing::warn!(job = %lease.job, attempt, error = %e, "jobs: recording the outcome failed");
                tokio::time::sleep(Duration::from_millis(100) * attempt).await;
            }
        }
    }
    None
}
