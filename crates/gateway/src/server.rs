//! Lifecycle: start in order (config → limiter → queues → writers →
//! listener), and on shutdown stop accepting, let in-flight requests finish
//! within the drain timeout, flush the writers, return.

mod conns;

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::config::Config;
use crate::routes;
use crate::state::{AppState, StartError};

/// A gateway bound to its address, ready to serve.
#[derive(Debug)]
pub struct Gateway {
    state: AppState,
    listener: TcpListener,
}

impl Gateway {
    /// Builds the state and binds `config.listen` (or `listen` when given).
    ///
    /// # Errors
    /// [`StartError`] naming what failed.
    pub async fn bind(config: Config, listen: Option<SocketAddr>) -> Result<Gateway, StartError> {
        let addr = listen.unwrap_or(config.listen);
        let state = AppState::start(config).await?;
        if state.config.jobs.enabled {
            let jobs = crate::jobs::Jobs::open(&state.config).await?;
            if state.config.jobs.workers {
                // The request path's limits: with `[redis]`, job rates and
                // the API buckets jobs call through are every replica's.
                let limits = state.limits.clone();
                jobs.start_workers(
                    &state.config,
                    &state.credentials,
                    limits,
                    state.client.clone(),
                )
                .await?;
            }
            let _ = state.jobs.set(jobs);
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| StartError::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let warnings = crate::warnings::startup_warnings(&state.config, bound);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let _ = state.warnings.set(warnings);
        Ok(Gateway { state, listener })
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

    /// Serves until `shutdown` resolves, then drains.
    ///
    /// # Errors
    /// None yet: accept errors are logged and retried. The `Result` is
    /// kept for listeners that can fail for good.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let Gateway { state, listener } = self;
        let drain = Duration::from_millis(state.config.shutdown.drain_timeout_ms);
        let app = routes::router(state.clone());
        let conns = conns::serve_until(listener, app, &state.config.http, shutdown).await;
        // Stop accepting (done), fail readiness, refuse new work. Requests
        // in flight and running jobs drain together, within one grace.
        state.drain();
        let deadline = Instant::now() + drain;
        let http = async {
            let cut = conns.drain(deadline).await;
            if cut > 0 {
                tracing::warn!(
                    ?drain,
                    connections = cut,
                    "shutdown grace over: closed connections with requests in flight"
                );
            }
            state.queue.close();
        };
        let jobs = async {
            if let Some(jobs) = state.jobs.get() {
                // Jobs still running at the deadline go back to the store
                // with no attempt used (the pool's report is logged).
                jobs.shutdown(deadline.saturating_duration_since(Instant::now()))
                    .await;
            }
        };
        tokio::join!(http, jobs);
        state.shutdown_writers().await;
        Ok(())
    }
}

/// Resolves on SIGINT or SIGTERM.
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
