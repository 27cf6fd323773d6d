//! Lifecycle: start in order (config → limiter → queues → writers →
//! listener), and on shutdown stop accepting, let in-flight requests finish
//! within the drain timeout, flush the writers, return.

mod conns;
mod threads;
mod write_timeout;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use threads::{BACKGROUND_THREAD, Serving, THREAD_NAME, is_gateway_thread};

use crate::config::Config;
use crate::error::StartError;
use crate::routes;
use crate::state::{AppState, Builder};

/// A gateway bound to its address, ready to serve.
#[derive(Debug)]
pub struct Gateway {
    state: AppState,
    listener: TcpListener,
}

impl Gateway {
    /// Builds the state ([`Builder`](crate::state::Builder): stores
    /// opened, writers and job workers started) and binds `config.listen`
    /// (or `listen` when given).
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub async fn bind(config: Config, listen: Option<SocketAddr>) -> Result<Gateway, StartError> {
        Gateway::bind_with(config, listen, sluice_jobs::Kinds::new()).await
    }

    /// [`Gateway::bind`], with job kinds of the embedder's own: the jobs
    /// API accepts them beside the standard ones (`http`, `discord.*`)
    /// and the workers run them.
    ///
    /// # Errors
    /// As [`Gateway::bind`]; [`StartError::StandardKind`] for a kind named as a
    /// standard one.
    pub async fn bind_with(
        config: Config,
        listen: Option<SocketAddr>,
        kinds: sluice_jobs::Kinds,
    ) -> Result<Gateway, StartError> {
        let addr = listen.unwrap_or(config.listen);
        let built = Builder::open(config, kinds).await?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let warnings =
            crate::warnings::startup_warnings(built.config(), bound, built.has_stored_tenants());
        for w in &warnings {
            tracing::warn!("{w}");
        }
        Ok(Gateway {
            state: built.finish(warnings),
            listener,
        })
    }

    /// The address it listens on (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The shared state (for embedding and tests).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves on `http.threads` serving threads it starts until
    /// `shutdown` resolves, then drains them, stops the job workers and
    /// flushes the writers. The caller's runtime keeps running the
    /// background tasks [`Gateway::bind`] started (writers, job workers,
    /// samplers) meanwhile: no serving thread runs them (see
    /// [`Gateway::spawn`]).
    ///
    /// # Errors
    /// A serving thread could not be started. Accept errors are logged
    /// and retried.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let Gateway { state, listener } = self;
        let drain = threads::drain_timeout(&state.config);
        let app = routes::router(state.clone());
        let cap = Arc::new(Semaphore::new(state.config.http.max_connections));
        let serving = threads::start(listener, &state, &app, &cap)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        shutdown.await;
        // Stop accepting, fail readiness, refuse new work. Requests in
        // flight and running jobs drain together, within one grace;
        // requests still waiting near its end are answered 503 by their
        // threads while their connections can carry it, instead of being
        // cut with the rest at the deadline.
        serving.stop();
        state.drain();
        let http = async {
            let cut = serving.drained().await;
            if cut > 0 {
                tracing::warn!(
                    ?drain,
                    connections = cut,
                    "shutdown grace over: closed connections with requests in flight"
                );
            }
            state.end_grace();
        };
        let jobs = async {
            let report = match &state.stores.jobs {
                Some(jobs) => jobs.stop_workers(drain).await,
                None => None,
            };
            if let Some(report) = report {
                if report.released > 0 {
                    tracing::warn!(
                        ?drain,
                        jobs = report.released,
                        "shutdown grace over: running jobs went back to their queue, no attempt used"
                    );
                }
                tracing::info!(?report, "job workers stopped");
            }
        };
        // Both drains start now and end by the same deadline.
        tokio::join!(http, jobs);
        // The store closes after both: a request in flight may still
        // read or enqueue jobs while the workers are long gone.
        state.stores.close().await;
        state.shutdown_writers().await;
        Ok(())
    }
}

/// At most this long before the end of the shutdown grace, requests still
/// waiting (for the admission queue, the limiter, a pool or a retry) are
/// answered 503 (a quarter of the grace when that is shorter).
const LAST_WORD: Duration = Duration::from_millis(500);

/// When, before the end of a grace of `drain`, waiting requests are
/// answered 503 ([`LAST_WORD`]).
fn last_word(drain: Duration) -> Duration {
    (drain / 4).min(LAST_WORD)
}

/// Resolves on SIGINT or SIGTERM, with the handlers installed now, not at
/// the future's first poll: what `sluice serve` passes to
/// [`Gateway::spawn`](crate::Gateway::spawn), so that a SIGTERM that comes
/// as soon as it says where it listens drains the gateway instead of
/// killing the process. Needs a runtime with I/O in this context; the
/// future may be polled on another runtime.
///
/// # Errors
/// When a handler cannot be installed.
pub fn shutdown_signal_now()
-> std::io::Result<std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(Box::pin(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
        }))
    }
    #[cfg(not(unix))]
    {
        Ok(Box::pin(shutdown_signal()))
    }
}

/// Resolves on SIGINT or SIGTERM (the handlers are installed when it is
/// first polled; see [`shutdown_signal_now`]).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
