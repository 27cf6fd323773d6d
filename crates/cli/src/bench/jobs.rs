//! `sluice bench jobs`: the durable job queue measured end to end.
//!
//! - **Throughput**, per backend (a SQLite temp file, durable settings,
//!   and PostgreSQL with `--postgres URL`): no-op jobs enqueued in batches,
//!   then burnt down by one worker pool, jobs/s for both.
//! - **Rate accuracy**: a queue limited to `--rate` jobs/s works a backlog
//!   for `--rate-seconds` in real time; from the start times: the most
//!   starts in any sliding 1-s window, the mean rate, and what a
//!   fixed-window limiter of the same rate would have let into one
//!   sliding second across a window boundary (see [`fixed_window_max`]).
//! - **Retry timing**: jobs that fail once with a retry due a few hundred
//!   ms later; how late each retry starts against its scheduled time.

use super::note;
use crate::table::Table;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_jobs::worker::{Handlers, Outcome, QueueConfig, WorkerPool, handler_fn};
use sluice_jobs::{
    Clock, JobState, JobStore, NewJob, PostgresStore, SqliteOptions, SqliteStore, StoreConfig,
    SystemClock, Tally,
};
use sluice_limit::{Limit, Limiter, Rules};
use sluice_sim::swarm::most_in_window;

/// What `sluice bench jobs` measures and how hard.
#[derive(Debug, Clone, clap::Args)]
pub struct JobsArgs {
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// No-op jobs enqueued and burnt down per backend.
    #[arg(long, default_value_t = 20_000)]
    pub jobs: u64,
    /// Jobs per enqueue batch (one transaction each).
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Jobs the burn-down pool runs at once.
    #[arg(long, default_value_t = 100)]
    pub concurrency: usize,
    /// Jobs the burn-down pool claims ahead of free slots (default: as
    /// many as `--concurrency`, the pool's default).
    #[arg(long)]
    pub prefetch: Option<usize>,
    /// Outcomes of the burn-down pool that may await their commit
    /// without holding a slot (default: four times `--concurrency`, the pool's
    /// default; 0 holds each slot until its outcome is committed).
    #[arg(long)]
    pub awaiting_commit: Option<usize>,
    /// Tenants the burn-down's jobs are spread over, round robin (1: the
    /// default tenant only). With more than one tenant or group, claims
    /// rank tenants' and groups' turns; with one of each they take the
    /// group's jobs in order.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub tenants: u32,
    /// Groups each tenant's burn-down jobs are spread over, round robin
    /// (1: the default group only).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub groups: u32,
    /// Also measure a PostgreSQL server at this URL (in a schema of its
    /// own, dropped afterwards).
    #[arg(long, env = "SLUICE_BENCH_POSTGRES_URL")]
    pub postgres: Option<String>,
    /// SQLite's `synchronous` level: `full` (every commit is fsynced
    /// before it is reported: survives power loss) or `normal` (in WAL
    /// mode: survives the process being killed, not the OS crashing).
    #[arg(long, default_value = "full")]
    pub sqlite_sync: SyncLevel,
    /// Seconds the rate-accuracy run lasts (0 skips it).
    #[arg(long, default_value_t = 20)]
    pub rate_seconds: u64,
    /// Jobs a second of the rate-accuracy run.
    #[arg(long, default_value_t = 10)]
    pub rate: u64,
    /// Retries the retry-timing run measures (0 skips it).
    #[arg(long, default_value_t = 200)]
    pub retries: u64,
}

/// Job `i` of the burn-down in its tenant and group (`--tenants`,
/// `--groups`), round robin; the defaults' when there is one of each.
fn spread(args: &JobsArgs, job: NewJob, i: u64) -> NewJob {
    let (tenants, groups) = (u64::from(args.tenants), u64::from(args.groups));
    let job = match tenants {
        1 => job,
        _ => job.tenant(format!("t{}", i % tenants)),
    };
    match groups {
        1 => job,
        _ => job.group(format!("g{}", (i / tenants) % groups)),
    }
}

/// SQLite's `synchronous` level for the bench.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncLevel {
    /// `synchronous = FULL`.
    Full,
    /// `synchronous = NORMAL`.
    Normal,
}

impl FromStr for SyncLevel {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Self::Full),
            "normal" => Ok(Self::Normal),
            other => Err(format!("expected full or normal, got {other:?}")),
        }
    }
}

impl SyncLevel {
    fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Normal => "normal",
        }
    }
}

/// The most jobs a run takes: bounded memory for the start times.
const MAX_JOBS: u64 = 10_000_000;

pub async fn jobs(args: JobsArgs) -> ExitCode {
    if !(1..=MAX_JOBS).contains(&args.jobs) {
        eprintln!("sluice bench: --jobs must be 1 to {MAX_JOBS}");
        return ExitCode::from(2);
    }
    if !(1..=10_000).contains(&args.batch)
        || !(1..=10_000).contains(&args.concurrency)
        || args.prefetch.is_some_and(|p| p > 10_000)
        || args.awaiting_commit.is_some_and(|n| n > 20_000)
    {
        eprintln!(
            "sluice bench: --batch and --concurrency must be 1 to 10000, --prefetch at most 10000, --awaiting-commit at most 20000"
        );
        return ExitCode::from(2);
    }
    if !(1..=10_000).contains(&args.rate) || args.rate_seconds > 3_600 || args.retries > 100_000 {
        eprintln!(
            "sluice bench: --rate must be 1 to 10000, --rate-seconds at most 3600, --retries at most 100000"
        );
        return ExitCode::from(2);
    }
    super::finish(args.json, run(&args).await, table)
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn run(args: &JobsArgs) -> Result<Value, BoxError> {
    let dir = std::env::temp_dir().join(format!("sluice-bench-jobs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let _cleanup = RemoveDir(dir.clone());
    let sqlite = open_sqlite(&dir.join("throughput.db"), args.sqlite_sync).await?;
    note(args.json, "throughput on SQLite");
    let tally = {
        let store = Arc::clone(&sqlite);
        move || store.tally()
    };
    let mut rates = vec![throughput(args, "sqlite", sqlite, tally).await?];
    if let Some(url) = &args.postgres {
        note(args.json, "throughput on PostgreSQL");
        let (store, schema) = open_postgres(url).await?;
        let tally = {
            let store = Arc::clone(&store);
            move || store.tally()
        };
        let result = throughput(args, "postgres", store.clone(), tally).await;
        store.close().await;
        drop_schema(url, &schema).await;
        rates.push(result?);
    }
    let rate = if args.rate_seconds > 0 {
        note(
            args.json,
            &format!("rate accuracy ({} s)", args.rate_seconds),
        );
        let store = open_sqlite(&dir.join("rate.db"), args.sqlite_sync).await?;
        rate_accuracy(args, store).await?
    } else {
        Value::Null
    };
    let retry = if args.retries > 0 {
        note(args.json, "retry timing");
        let store = open_sqlite(&dir.join("retry.db"), args.sqlite_sync).await?;
        retry_timing(args, store).await?
    } else {
        Value::Null
    };
    Ok(json!({
        "jobs": args.jobs,
        "batch": args.batch,
        "concurrency": args.concurrency,
        "prefetch": args.prefetch.unwrap_or(args.concurrency),
        "awaiting_commit": args.awaiting_commit.unwrap_or(2 * args.concurrency),
        "tenants": args.tenants,
        "groups": args.groups,
        "sqlite_synchronous": args.sqlite_sync.as_str(),
        "throughput": rates,
        "rate": rate,
        "retry": retry,
    }))
}

struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn open_sqlite(
    path: &std::path::Path,
    sync: SyncLevel,
) -> Result<Arc<SqliteStore>, BoxError> {
    let options = SqliteOptions::file(path).full_sync(sync == SyncLevel::Full);
    Ok(Arc::new(
        SqliteStore::open_with(options, StoreConfig::default()).await?,
    ))
}

/// A store in a new schema of its own on `url`, and that schema's name.
async fn open_postgres(url: &str) -> Result<(Arc<PostgresStore>, String), BoxError> {
    use sqlx::Connection;
    let schema = format!("sluice_bench_jobs_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .map_err(|e| format!("--postgres: cannot connect: {e}"))?;
    let ddl = format!("DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let options = sluice_jobs::without_jit(sqlx::postgres::PgConnectOptions::from_str(url)?)
        .options([("search_path", &schema)]);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(10)
        .connect_with(options)
        .await?;
    let store = PostgresStore::from_pool(pool, StoreConfig::default()).await?;
    Ok((Arc::new(store), schema))
}

async fn drop_schema(url: &str, schema: &str) {
    use sqlx::Connection;
    if let Ok(mut conn) = sqlx::PgConnection::connect(url).await {
        let ddl = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(ddl))
            .execute(&mut conn)
            .await;
        let _ = conn.close().await;
    }
}

fn noop_handlers() -> Handlers {
    Handlers::new().on(
        "noop",
        handler_fn(|_| async { Outcome::Completed(Value::Null) }),
    )
}

/// Waits until `pool` has completed `n` jobs, or no progress for 60 s.
async fn until_completed(pool: &WorkerPool, n: u64) -> Result<(), BoxError> {
    let mut last = 0;
    let mut since = Instant::now();
    loop {
        let done = pool.report().completed;
        if done >= n {
            return Ok(());
        }
        if done != last {
            last = done;
            since = Instant::now();
        } else if since.elapsed() > Duration::from_secs(60) {
            return Err(format!("stalled: {done} of {n} jobs completed").into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Jobs of `queue` in state `state`, from the store.
async fn count(store: &impl JobStore, queue: &str, state: JobState) -> Result<u64, BoxError> {
    Ok(store
        .counts()
        .await?
        .iter()
        .find(|q| q.queue == queue)
        .map_or(0, |q| q.counts.get(state)))
}

/// Per job, what a stretch of work cost the database (see [`Tally`]).
fn per_job(cost: Tally, jobs: u64) -> Value {
    let per = |n: u64| round3(n as f64 / jobs.max(1) as f64);
    json!({
        "statements": per(cost.statements),
        "commits": per(cost.commits),
        "synced_commits": per(cost.synced_commits),
    })
}

async fn throughput<S: JobStore + 'static>(
    args: &JobsArgs,
    backend: &str,
    store: Arc<S>,
    tally: impl Fn() -> Tally,
) -> Result<Value, BoxError> {
    let queue = "burn";
    let before = tally();
    let start = Instant::now();
    let mut n = 0;
    while n < args.jobs {
        let end = (n + args.batch as u64).min(args.jobs);
        let batch: Vec<NewJob> = (n..end)
            .map(|i| spread(args, NewJob::new(queue, "noop", json!({ "i": i })), i))
            .collect();
        n = end;
        store.enqueue_batch(batch).await?;
    }
    let enqueue = start.elapsed();
    let enqueued = tally();

    let mut config = QueueConfig::new(queue)
        .unlimited()
        .concurrency(args.concurrency);
    if let Some(n) = args.prefetch {
        config = config.prefetch(n);
    }
    if let Some(n) = args.awaiting_commit {
        config = config.awaiting_commit(n);
    }
    let cpu_before = crate::stack::process_and_sqlite_cpu();
    let start = Instant::now();
    let pool = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new())?)
        .handlers(noop_handlers())
        .queue(config)
        .configure(|c| {
            c.poll = Duration::from_millis(5);
            c.cleanup_every = None;
        })
        .start()?;
    until_completed(&pool, args.jobs).await?;
    let burn = start.elapsed();
    let burnt = tally();
    let cpu_after = crate::stack::process_and_sqlite_cpu();
    // Microseconds of CPU per job of the burn-down, this process's (a
    // PostgreSQL server's are not counted): what the machine's cores bound.
    let cpu_us = |i: usize| match (cpu_before[i], cpu_after[i]) {
        (Some(a), Some(b)) => json!(round3(
            b.saturating_sub(a).as_secs_f64() * 1e6 / args.jobs as f64
        )),
        _ => Value::Null,
    };
    pool.shutdown(Duration::from_secs(5)).await;
    let completed = count(&*store, queue, JobState::Completed).await?;
    let per_second = |d: Duration| args.jobs as f64 / d.as_secs_f64().max(1e-9);
    Ok(json!({
        "backend": backend,
        "enqueue_jobs_per_second": round(per_second(enqueue)),
        "enqueue_seconds": round3(enqueue.as_secs_f64()),
        "burn_jobs_per_second": round(per_second(burn)),
        "burn_seconds": round3(burn.as_secs_f64()),
        "completed": completed,
        "enqueue_per_job": per_job(enqueued - before, args.jobs),
        "burn_per_job": per_job(burnt - enqueued, args.jobs),
        "burn_cpu_us_per_job": cpu_us(0),
        "burn_sqlite_cpu_us_per_job": cpu_us(1),
    }))
}

/// Start times since the run's start, in microseconds (integers, so that
/// window edges compare exactly).
type Starts = Arc<Mutex<Vec<u64>>>;

/// One second in the units of [`Starts`].
const SECOND: u64 = 1_000_000;

async fn rate_accuracy(args: &JobsArgs, store: Arc<SqliteStore>) -> Result<Value, BoxError> {
    let queue = "rate";
    let total = args.rate * args.rate_seconds;
    let starts: Starts = Arc::new(Mutex::new(Vec::with_capacity(total as usize)));
    let origin = Instant::now();
    let seen = Arc::clone(&starts);
    let handlers = Handlers::new().on(
        "noop",
        handler_fn(move |_| {
            let t = u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX);
            seen.lock().unwrap_or_else(|p| p.into_inner()).push(t);
            async { Outcome::Completed(Value::Null) }
        }),
    );
    let jobs: Vec<NewJob> = (0..total)
        .map(|i| NewJob::new(queue, "noop", json!({ "i": i })))
        .collect();
    store.enqueue_batch(jobs).await?;
    let limit = Limit::sliding_window(args.rate, Duration::from_secs(1));
    let pool = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new())?)
        .handlers(handlers)
        .queue(QueueConfig::new(queue).rate(limit).concurrency(5))
        .configure(|c| c.cleanup_every = None)
        .start()?;
    until_completed(&pool, total).await?;
    pool.shutdown(Duration::from_secs(5)).await;
    let mut starts = starts.lock().unwrap_or_else(|p| p.into_inner()).clone();
    starts.sort_unstable();
    let mean = mean_rate(&starts);
    let fixed = fixed_window_max(&starts, args.rate);
    Ok(json!({
        "rate_per_second": args.rate,
        "seconds": args.rate_seconds,
        "jobs": total,
        "completed": count(&*store, queue, JobState::Completed).await?,
        "max_in_sliding_second": most_in_window(&starts, SECOND),
        "mean_per_second": round3(mean),
        "mean_error_percent": round3((mean / args.rate as f64 - 1.0) * 100.0),
        "fixed_window_max_in_sliding_second": fixed,
    }))
}

/// Starts a second over the whole seconds since the first start: the
/// starts in `[first, first + k s)` over `k`, the most whole seconds the
/// run spans. Fair to bursty and to evenly spaced starts alike (a sliding
/// window lets its whole allowance through at once, then one more start
/// for each that leaves the window).
fn mean_rate(starts: &[u64]) -> f64 {
    let (Some(&first), Some(&last)) = (starts.first(), starts.last()) else {
        return 0.0;
    };
    let k = (last - first) / SECOND;
    if k == 0 {
        return 0.0;
    }
    let within = starts.iter().filter(|&&t| t < first + k * SECOND).count();
    within as f64 / k as f64
}

/// What a fixed-window limiter of `rate` a second would have let into one
/// sliding second, replayed on the same run: the same backlog (one job per
/// observed start, all ready at the first start), started back to back as
/// fast as this run's workers ever started two jobs (the smallest gap
/// between observed starts), `rate` per window of 1 s. Windows are tried
/// at every phase against the first start (10 ms steps) and the worst is
/// reported: a fixed window resets at its boundary, so the end of one
/// window and the start of the next add up.
fn fixed_window_max(starts: &[u64], rate: u64) -> usize {
    let (Some(&first), true) = (starts.first(), starts.len() > 1) else {
        return starts.len();
    };
    let gap = starts.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(0);
    let mut worst = 0;
    for phase in (0..SECOND).step_by(10_000) {
        // The run begins `phase` into window 0: window k starts at
        // `first - phase + k s`.
        let index = |t: u64| (t - first + phase) / SECOND;
        let mut admitted = Vec::with_capacity(starts.len());
        let (mut t, mut used) = (first, 0);
        let mut window = index(t);
        for _ in starts {
            if index(t) != window {
                window = index(t);
                used = 0;
            }
            if used >= rate {
                // The window is spent: the backlog waits for the next one.
                window += 1;
                t = t.max(first + window * SECOND - phase);
                used = 0;
            }
            admitted.push(t);
            used += 1;
            t += gap;
        }
        worst = worst.max(most_in_window(&admitted, SECOND));
    }
    worst
}

async fn retry_timing(args: &JobsArgs, store: Arc<SqliteStore>) -> Result<Value, BoxError> {
    let queue = "retry";
    let late: Arc<Mutex<Vec<i64>>> = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&late);
    let handlers = Handlers::new().on(
        "flaky",
        handler_fn(move |job| {
            let outcome = if job.attempts == 0 {
                // Retries due 100 ms to 1.1 s later, spread over the run.
                let after = 100 + job.id.0.rem_euclid(1_000);
                Outcome::Retry {
                    error: "first attempt fails".to_owned(),
                    retry_after: Some(Duration::from_millis(after.unsigned_abs())),
                }
            } else {
                let now = SystemClock.now();
                let ms = now.as_millis() - job.run_at.as_millis();
                seen.lock().unwrap_or_else(|p| p.into_inner()).push(ms);
                Outcome::Completed(Value::Null)
            };
            async move { outcome }
        }),
    );
    let jobs: Vec<NewJob> = (0..args.retries)
        .map(|i| NewJob::new(queue, "flaky", json!({ "i": i })))
        .collect();
    store.enqueue_batch(jobs).await?;
    let pool = WorkerPool::builder(Arc::clone(&store), Limiter::new(Rules::new())?)
        .handlers(handlers)
        .queue(QueueConfig::new(queue).unlimited().concurrency(50))
        .configure(|c| c.cleanup_every = None)
        .start()?;
    until_completed(&pool, args.retries).await?;
    pool.shutdown(Duration::from_secs(5)).await;
    let mut late = late.lock().unwrap_or_else(|p| p.into_inner()).clone();
    late.sort_unstable();
    let at = |q: f64| {
        let i = ((late.len() as f64 - 1.0) * q).round() as usize;
        late.get(i).copied().unwrap_or(0)
    };
    Ok(json!({
        "retries": late.len(),
        "completed": count(&*store, queue, JobState::Completed).await?,
        "late_ms": {
            "p50": at(0.5),
            "p99": at(0.99),
            "max": late.last().copied().unwrap_or(0),
        },
    }))
}

fn round(x: f64) -> f64 {
    x.round()
}

fn round3(x: f64) -> f64 {
    (x * 1_000.0).round() / 1_000.0
}

fn table(r: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice bench jobs: {} no-op jobs, batches of {}, concurrency {}, prefetch {}, awaiting commit {}, {} tenant(s) x {} group(s), SQLite synchronous={}",
        r["jobs"],
        r["batch"],
        r["concurrency"],
        r["prefetch"],
        r["awaiting_commit"],
        r["tenants"],
        r["groups"],
        r["sqlite_synchronous"].as_str().unwrap_or("")
    );
    let num = |v: &Value| format!("{:.0}", v.as_f64().unwrap_or(f64::NAN));
    let per = |v: &Value, digits: usize| format!("{:.*}", digits, v.as_f64().unwrap_or(f64::NAN));
    let mut t = Table::new([
        "backend",
        "enqueue jobs/s",
        "burn jobs/s",
        "completed",
        "statements/job",
        "commits/job",
        "synced/job",
        "CPU µs/job",
        "SQLite threads µs/job",
    ])
    .right(1..9);
    for b in r["throughput"].as_array().into_iter().flatten() {
        // What the burn-down asked of the database per job: load does not move these.
        let cost = &b["burn_per_job"];
        t.row([
            b["backend"].as_str().unwrap_or("").to_owned(),
            num(&b["enqueue_jobs_per_second"]),
            num(&b["burn_jobs_per_second"]),
            num(&b["completed"]),
            per(&cost["statements"], 3),
            per(&cost["commits"], 4),
            per(&cost["synced_commits"], 4),
            per(&b["burn_cpu_us_per_job"], 1),
            per(&b["burn_sqlite_cpu_us_per_job"], 1),
        ]);
    }
    let _ = write!(out, "\n{}", t.render());
    let rate = &r["rate"];
    if !rate.is_null() {
        let _ = writeln!(
            out,
            "\nrate accuracy at {}/s for {} s: max {} starts in any sliding second, mean {}/s ({}%); \
             a fixed-window limiter would have let {} through across a boundary",
            rate["rate_per_second"],
            rate["seconds"],
            rate["max_in_sliding_second"],
            rate["mean_per_second"],
            rate["mean_error_percent"],
            rate["fixed_window_max_in_sliding_second"]
        );
    }
    let retry = &r["retry"];
    if !retry.is_null() {
        let late = &retry["late_ms"];
        let _ = writeln!(
            out,
            "retry timing ({} retries): started late by p50 {} ms, p99 {} ms, max {} ms",
            retry["retries"], late["p50"], late["p99"], late["max"]
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_windows_are_half_open() {
        let ms: u64 = 1_000;
        assert_eq!(
            most_in_window(&[0, 500 * ms, 1_000 * ms, 1_200 * ms], SECOND),
            3
        );
        assert_eq!(most_in_window::<u64, u64>(&[], SECOND), 0);
    }

    #[test]
    fn fixed_windows_let_twice_the_rate_across_a_boundary() {
        // A sliding window of 10/s on a backlog: ten starts 1 ms apart,
        // again every second, for 3 s.
        let starts: Vec<u64> = (0..30)
            .map(|i| (i / 10) * SECOND + (i % 10) * 1_000)
            .collect();
        assert_eq!(most_in_window(&starts, SECOND), 10);
        assert!((mean_rate(&starts) - 10.0).abs() < 1e-9);
        let fixed = fixed_window_max(&starts, 10);
        assert!(fixed > 15 && fixed <= 20, "{fixed}");
        // Evenly spaced starts: the same mean.
        let even: Vec<u64> = (0..30).map(|i| i * SECOND / 10).collect();
        assert!((mean_rate(&even) - 10.0).abs() < 1e-9);
    }
}
