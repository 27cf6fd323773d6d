//! The Sluice gateway: an HTTP server in front of model providers and SaaS
//! APIs that limits, queues, retries and accounts for every call of an
//! agent swarm.
//!
//! ```no_run
//! use sluice_gateway::{Gateway, config};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = config::load(None)?; // embedded defaults + SLUICE_* overrides
//! let gateway = Gateway::bind(config, None).await?;
//! println!("listening on {}", gateway.local_addr());
//! gateway.serve(sluice_gateway::shutdown_signal()).await?;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod access;
pub mod audit;
pub mod body;
mod budgets;
mod cache;
mod client;
pub mod config;
mod credentials;
pub mod dashboard;
pub mod error;
pub mod jobs;
pub mod keys;
mod layers;
mod ledger;
mod limits;
mod mcp;
pub mod metrics;
mod names;
mod otel;
mod pools;
mod providers;
mod ready;
mod request;
pub mod response;
pub mod routes;
mod server;
mod state;
pub mod stores;
pub mod trace;
pub mod warnings;
mod watchdog;

pub use error::StartError;
pub use layers::{auth, context};
pub use ledger::LEDGER_THREAD;
pub use server::{
    BACKGROUND_THREAD, Gateway, Serving, THREAD_NAME, is_gateway_thread, shutdown_signal,
    shutdown_signal_now,
};
pub use state::AppState;
