//! Lifecycle: start in order (config → limiter → queues → writers →
//! listener), and on shutdown stop accepting, let in-flight requests finish
//! within the drain timeout, flush the writers, return.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;

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
                let limits = state.limits.for_jobs();
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
    /// I/O errors of the listener.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let Gateway { state, listener } = self;
        let drain = Duration::from_millis(state.config.shutdown.drain_timeout_ms);
        let app = routes::router(state.clone());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let signal_state = state.clone();
        tokio::spawn(async move {
            shutdown.await;
            signal_state.drain();
            let _ = stop_tx.send(true);
        });
        let mut stopped = stop_rx.clone();
        let server = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stopped.wait_for(|s| *s).await;
        });
        let mut server = std::pin::pin!(server.into_future());
        let mut stopped = stop_rx;
        tokio::select! {
            r = &mut server => r?,
            // A block, so that no `watch::Ref` is held across the drain
            // (it would make this future !Send).
            _ = async { let _ = stopped.wait_for(|s| *s).await; } => {
                // Stop accepting; in-flight requests get the drain timeout.
                if tokio::time::timeout(drain, &mut server).await.is_err() {
                    tracing::warn!(?drain, "drain timeout: closing the remaining connections");
                }
            }
        }
        state.queue.close();
        if let Some(jobs) = state.jobs.get() {
            // Running jobs get the same drain timeout as requests.
            jobs.shutdown(drain).await;
        }
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
