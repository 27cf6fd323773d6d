//! The limiter API's acquire (`POST /v1/limits/acquire`) as a stack of
//! its own, composed here in the order of the request path:
//!
//! ```text
//! read (context, body, resource) → hold → lane (admission) → take (limiter)
//! ```
//!
//! An acquire waits in the same admission queue as the gateway's own
//! requests (the resource's lane: priorities, per-tenant fairness, depth
//! limits), then for the limiter; the grant it gets is held for the tenant
//! ([`crate::limits::holds`]) until it is released or its TTL passes. A
//! refusal on the way is the answer: 429 on the resource with its wait.

mod ask;
mod lane;
mod take;

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use serde_json::{Value, json};
use sluice_admit::Ticket;
use tokio::time::Instant;
use tower::ServiceBuilder;

use super::Next;
use super::auth::Tenant;
use super::step::{Stateful, Step, StepLayer};
use crate::error::ApiError;
use crate::limits::resources::unscoped;
use crate::state::AppState;

pub(crate) use ask::{AcquireBody, Target, hold_error};

/// What every step of the stack answers.
pub(crate) type Answer = Result<Value, ApiError>;

/// The acquire stack (it holds nothing: see [`super::step`]).
pub(crate) fn stack() -> impl Next<Acquire, Answer> {
    ServiceBuilder::new()
        .layer(StepLayer::<ask::Read>::new())
        .layer(StepLayer::<Hold>::new())
        .layer(StepLayer::<lane::Lane>::new())
        .service(take::Take)
}

/// An acquire as its handler hands it over.
#[derive(Debug)]
pub(crate) struct Acquire {
    pub state: AppState,
    pub tenant: Tenant,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// An acquire read and checked: what it waits for.
#[derive(Debug)]
pub(crate) struct Ask {
    state: AppState,
    /// The tenant, who owns the grant.
    owner: Arc<str>,
    /// The limiter resource, in the tenant's scope.
    resource: String,
    cost: u64,
    /// The key's and its tenant's own limits, taken with the resource.
    caller: Vec<(String, u64)>,
    /// Whether it waits (for its lane, then the limiter) until
    /// `deadline`, or takes what is free now or nothing.
    waits: bool,
    deadline: Instant,
    /// Its place in the resource's lane, until it takes it.
    ticket: Option<Ticket>,
}

/// A grant the limiter gave, with what was asked.
#[derive(Debug)]
struct Granted {
    ask: Ask,
    grant: sluice_limit::Permit,
}

impl Stateful for Acquire {
    fn state(&self) -> &AppState {
        &self.state
    }
}

impl Stateful for Ask {
    fn state(&self) -> &AppState {
        &self.state
    }
}

/// Holds the grant the steps below got for the tenant, and answers with
/// its id.
enum Hold {}

impl<S: Next<Ask, Result<Granted, ApiError>>> Step<Ask, S> for Hold {
    type Response = Answer;

    async fn serve(state: AppState, inner: S, ask: Ask) -> Answer {
        let Granted { ask, grant } = inner.call(ask).await?;
        let ttl = Duration::from_millis(state.config.limits_api.lease_ttl_ms);
        let id = state
            .limits
            .holds
            .hold(&ask.owner, ask.resource.clone(), ask.cost, grant, ttl)
            .map_err(hold_error)?;
        Ok(json!({
            "grant_id": id.to_string(),
            "resource": unscoped(&ask.owner, &ask.resource).unwrap_or(ask.resource),
            "cost": ask.cost,
            "max_actual_cost": state.limits.holds.max_settle(ask.cost),
            "expires_in_ms": ttl.as_millis() as u64,
        }))
    }
}
