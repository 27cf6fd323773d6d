//! The serving threads: each runs a current-thread runtime that accepts
//! on its own copy of the listening socket and serves what it accepted,
//! upstream calls included (each thread has its own upstream pool,
//! `client.rs`), so that a request is read, sent on, answered and written
//! back on one thread.
//!
//! Why not tokio's multi-thread runtime: on a 2-CPU machine it woke a
//! second worker for nearly every step of a request (a task queued behind
//! the one running is offered to a parked worker, which wakes, finds
//! nothing or steals it, and parks again): 8.3 context switches and 5.3
//! futex calls per request at 1,000 requests a second, where the work
//! itself needs two wake-ups (the request, the upstream's answer). Each
//! wake-up of a parked thread costs tens to hundreds of microseconds on a
//! VM; `docs/gateway.md`, "Wake-ups", has the counts before and after.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::time::Instant;

use super::{Gateway, conns, last_word};
use crate::config::Config;
use crate::routes::Edge;
use crate::state::{AppState, StartError};

/// The name of the gateway's threads (Linux keeps 15 bytes of it), its
/// serving threads and their blocking pools alike: `top -H` and `sluice
/// bench gateway`'s CPU figures find them by it.
pub const THREAD_NAME: &str = "sluice-gateway";

/// A current-thread runtime for a serving thread.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .thread_name(THREAD_NAME)
        .enable_all()
        .build()
}

/// The serving threads other than the first (which is [`Gateway::serve`]'s
/// caller).
#[derive(Debug)]
pub(super) struct Others {
    stop: watch::Sender<bool>,
    /// Each thread's count of connections it had to cut at the deadline.
    drained: Vec<oneshot::Receiver<usize>>,
}

/// Starts `http.threads - 1` serving threads beside the caller's, each
/// serving `app` on a copy of `listener` within the shared `cap`; gives
/// back the caller's listener.
pub(super) fn start(
    listener: TcpListener,
    state: &AppState,
    app: &Edge,
    cap: &Arc<Semaphore>,
) -> Result<(TcpListener, Others), StartError> {
    let (stop, stopped) = watch::channel(false);
    let mut others = Others {
        stop,
        drained: Vec::new(),
    };
    let threads = state.config.http.serving_threads();
    if threads <= 1 {
        return Ok((listener, others));
    }
    // A copy (`dup`) per thread, each registered with its own runtime:
    // every idle thread hears of a new connection and the first to
    // accept it serves it, so connections go to threads that are free.
    let listener = listener.into_std().map_err(StartError::Threads)?;
    for index in 1..threads {
        let copy = listener.try_clone().map_err(StartError::Threads)?;
        let (done, drained) = oneshot::channel();
        let (state, app, cap) = (state.clone(), app.clone(), Arc::clone(cap));
        let mut stopped = stopped.clone();
        let serve = move || async move {
            crate::client::use_pool(index);
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
        on_a_thread(serve, move |cut| match cut {
            Ok(cut) => {
                let _ = done.send(cut);
            }
            Err(e) => tracing::error!(error = %e, "a serving thread's runtime"),
        })?;
        others.drained.push(drained);
    }
    let listener = TcpListener::from_std(listener).map_err(StartError::Threads)?;
    Ok((listener, others))
}

impl Others {
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
    /// the first, named [`THREAD_NAME`], runs a current-thread runtime
    /// that also carries the gateway's background tasks (writers, job
    /// workers), and starts the other `http.threads - 1`. What `sluice
    /// serve` runs. Returns once bound.
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
        on_a_thread(serve, move |served| {
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

/// Runs the future `work` makes on a thread named [`THREAD_NAME`] with a
/// current-thread runtime of its own, then hands its output to `done`
/// once the runtime is gone (its blocking tasks, a last trace write,
/// finished); or why the runtime could not be built.
fn on_a_thread<F: Future + 'static>(
    work: impl FnOnce() -> F + Send + 'static,
    done: impl FnOnce(std::io::Result<F::Output>) + Send + 'static,
) -> Result<(), StartError> {
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || {
            done(runtime().map(|rt| {
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
