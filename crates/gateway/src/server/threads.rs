//! The gateway's threads. `http.threads` serving threads each run a
//! current-thread runtime that accepts on its own copy of the listening
//! socket and serves what it accepted, upstream calls included (each
//! thread has its own upstream pool, `client.rs`), so that a request is
//! read, sent on, answered and written back on one thread. One more
//! thread, [`BACKGROUND_THREAD`], carries everything else (but the
//! `[redis]` limiter's calls, which each serving thread makes on a
//! connection of its own: `sluice_redis::batch_on_this_thread`): the writers
//! (traces, audit, OpenTelemetry), the job workers, the dashboard's
//! sampler, the limiter's upkeep, and the shutdown.
//!
//! Why not tokio's multi-thread runtime: on a 2-CPU machine it woke a
//! second worker for nearly every step of a request (a task queued behind
//! the one running is offered to a parked worker, which wakes, finds
//! nothing or steals it, and parks again): 8.3 context switches and 5.3
//! futex calls per request at 1,000 requests a second, where the work
//! itself needs two wake-ups (the request, the upstream's answer). Each
//! wake-up of a parked thread costs tens to hundreds of microseconds on a
//! VM; `docs/gateway.md`, "Wake-ups", has the counts before and after.
//!
//! Why the background work is not on a serving thread: without work
//! stealing, a request that thread accepted waits behind whatever
//! background task runs there (a trace batch, a dashboard sample, a job
//! attempt); on a thread of its own the kernel runs it beside the
//! requests instead, and a serving thread only ever runs requests.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::time::Instant;

use super::{Gateway, conns, last_word};
use crate::config::Config;
use crate::error::StartError;
use crate::routes::Edge;
use crate::state::AppState;

/// The name of the gateway's serving threads (Linux keeps 15 bytes of
/// it) and of their blocking pools: `top -H` finds them by it.
pub const THREAD_NAME: &str = "sluice-gateway";

/// The name of the thread that carries the gateway's background tasks
/// and of its blocking pool (the trace writer's file writes).
pub const BACKGROUND_THREAD: &str = "sluice-gw-tasks";

/// Whether a thread of this name is one of the gateway's own (serving or
/// background): what `sluice bench gateway` counts as the gateway's CPU,
/// the trace writer's included, since requests cause it.
pub fn is_gateway_thread(name: &str) -> bool {
    name == THREAD_NAME || name == BACKGROUND_THREAD
}

/// A current-thread runtime whose blocking pool's threads are `name`d.
fn runtime(name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .thread_name(name)
        .enable_all()
        .build()
}

/// The serving threads.
#[derive(Debug)]
pub(super) struct Threads {
    stop: watch::Sender<bool>,
    /// Each thread's count of connections it had to cut at the deadline.
    drained: Vec<oneshot::Receiver<usize>>,
}

/// Starts `http.threads` serving threads, each serving `app` on a copy of
/// `listener` within the shared `cap`.
pub(super) fn start(
    listener: TcpListener,
    state: &AppState,
    app: &Edge,
    cap: &Arc<Semaphore>,
) -> Result<Threads, StartError> {
    let (stop, stopped) = watch::channel(false);
    let mut threads = Threads {
        stop,
        drained: Vec::new(),
    };
    // A copy (`dup`) per thread, each registered with its own runtime:
    // every idle thread hears of a new connection and the first to
    // accept it serves it, so connections go to threads that are free.
    let listener = listener.into_std().map_err(StartError::Threads)?;
    for index in 0..state.config.http.serving_threads().max(1) {
        let copy = listener.try_clone().map_err(StartError::Threads)?;
        let (done, drained) = oneshot::channel();
        let (state, app, cap) = (state.clone(), app.clone(), Arc::clone(cap));
        let mut stopped = stopped.clone();
        let serve = move || async move {
            crate::client::use_pool(index);
            // `[redis]` decisions go to Redis from this thread, not by way
            // of the background thread (docs/gateway.md, "With `[redis]`").
            sluice_redis::batch_on_this_thread();
            let listener = match TcpListener::from_std(copy) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!(error = %e, "a serving thread's listener");
                    return 0;
                }
            };
            let stop = async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            };
            let http = state.config.http;
            let conns = conns::serve_until(listener, app, &http, cap, stop).await;
            let drain = drain_timeout(&state.config);
            let deadline = Instant::now() + drain;
            conns
                .drain(deadline, last_word(drain), || state.end_grace())
                .await
        };
        // The first that cannot start stops the others (the watch's
        // sender dropped with `threads`).
        on_a_thread(THREAD_NAME, serve, move |cut| match cut {
            Ok(cut) => {
                let _ = done.send(cut);
            }
            Err(e) => tracing::error!(error = %e, "a serving thread's runtime"),
        })?;
        threads.drained.push(drained);
    }
    Ok(threads)
}

impl Threads {
    /// Tells them to stop accepting and drain their connections, each
    /// within the drain timeout from now.
    pub(super) fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Waits until they have drained; how many connections they cut.
    pub(super) async fn drained(self) -> usize {
        let mut cut = 0;
        for drained in self.drained {
            // A thread that could not start has no connections to cut.
            cut += drained.await.unwrap_or(0);
        }
        cut
    }
}

/// A gateway serving on threads of its own ([`Gateway::spawn`]).
#[derive(Debug)]
pub struct Serving {
    addr: SocketAddr,
    stopped: oneshot::Receiver<std::io::Result<()>>,
}

impl Gateway {
    /// Builds and binds a gateway for `config` (on `listen` when given)
    /// and serves it until `shutdown` resolves, on threads of its own:
    /// [`BACKGROUND_THREAD`] runs a current-thread runtime that binds,
    /// carries the gateway's background tasks (writers, job workers,
    /// samplers) and the shutdown, and starts the `http.threads` serving
    /// threads ([`THREAD_NAME`]). What `sluice serve` runs. Returns once
    /// bound.
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub async fn spawn(
        config: Config,
        listen: Option<SocketAddr>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<Serving, StartError> {
        let (ready, bound) = oneshot::channel();
        let (done, mut stopped) = oneshot::channel();
        let serve = move || async move {
            let gateway = match Gateway::bind(config, listen).await {
                Ok(g) => g,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return Ok(());
                }
            };
            let _ = ready.send(Ok(gateway.local_addr()));
            gateway.serve(shutdown).await
        };
        on_a_thread(BACKGROUND_THREAD, serve, move |served| {
            let _ = done.send(served.and_then(|served| served));
        })?;
        let addr = match bound.await {
            Ok(bound) => bound?,
            // The runtime could not be built: the thread said why.
            Err(_) => {
                let why = (&mut stopped).await.map_or_else(
                    |_| std::io::Error::other("the gateway thread panicked"),
                    |r| {
                        r.err()
                            .unwrap_or_else(|| std::io::Error::other("the gateway thread ended"))
                    },
                );
                return Err(StartError::Threads(why));
            }
        };
        Ok(Serving { addr, stopped })
    }
}

impl Serving {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until it has stopped: connections drained, writers flushed,
    /// its runtime gone.
    ///
    /// # Errors
    /// What [`Gateway::serve`] returned, or that the thread panicked.
    pub async fn stopped(self) -> std::io::Result<()> {
        self.stopped
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the gateway thread panicked")))
    }
}

/// Runs the future `work` makes on a thread named `name` with a
/// current-thread runtime of its own, then hands its output to `done`
/// once the runtime is gone (its blocking tasks, a last trace write,
/// finished); or why the runtime could not be built.
fn on_a_thread<F: Future + 'static>(
    name: &'static str,
    work: impl FnOnce() -> F + Send + 'static,
    done: impl FnOnce(std::io::Result<F::Output>) + Send + 'static,
) -> Result<(), StartError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            done(runtime(name).map(|rt| {
                let out = rt.block_on(work());
                drop(rt);
                out
            }));
        })
        .map(drop)
        .map_err(StartError::Threads)
}

/// How long the grace after a shutdown lasts.
pub(super) fn drain_timeout(config: &Config) -> Duration {
    Duration::from_millis(config.shutdown.drain_timeout_ms)
}
