//! Limits: before every attempt, the limiter grants what the call needs —
//! requests, estimated tokens, in-flight slots, the session — or says how
//! long to wait; after it, the upstream's own rate-limit headers and
//! status (a 429, say) tell the limiter what the upstream thinks.
//!
//! The limiter is waited for at most the Retry-After cap: past it, a fast
//! 429 tells the client when to come back instead of holding it; and
//! only until `retry.min_time_left_ms` before the deadline.

use std::time::{Duration, SystemTime};

use sluice_limit::headers::RateLimitHeaders;
use tokio::time::Instant;

use super::failure::Failure;
use super::step::{Step, StepLayer};
use super::upstream::{Granted, Pooled, Try};
use super::{Next, Req, Served, call, observe};
use crate::error::ApiError;
use crate::state::AppState;

/// Wraps a stack in [`Limits`].
pub(crate) type LimitsLayer = StepLayer<Limits>;

/// See the module doc.
pub(crate) enum Limits {}

impl<S> Step<Req<Try>, S> for Limits
where
    S: Next<Req<Try>, Served<Pooled, Failure>>,
{
    type Response = Served<Granted, Failure>;

    async fn serve(state: AppState, inner: S, req: Req<Try>) -> Served<Granted, Failure> {
        let up = req.call.upstream.clone();
        let plan = &up.plan;
        let cap = Instant::now() + Duration::from_millis(state.config.retry.max_retry_after_ms);
        let needs: Vec<(&str, u64)> = plan.needs.iter().map(|(r, c)| (r.as_str(), *c)).collect();
        let until = up.last_send(&state.config.retry).min(cap);
        let acquire = state.limits.shared.acquire_many(&needs, Some(until));
        let Some(acquired) = state.grace.unless_over(acquire).await else {
            return Served::err(crate::state::Grace::ended(), req.notes);
        };
        let grant = match acquired {
            Ok(g) => g,
            Err(e) => {
                let reason = match &e {
                    sluice_limit::Error::InsufficientCapacity { .. } => "too_large",
                    sluice_limit::Error::Closed => "closed",
                    _ => "rate_limited",
                };
                observe::refused(&plan.requests, reason);
                let policy = state
                    .limits
                    .shared
                    .get_capacity(&plan.requests)
                    .await
                    .ok()
                    .map(|c| (c.total, c.window));
                return Served::err(ApiError::from_limit(e, policy), req.notes);
            }
        };
        observe::granted(plan, req.call.limiter_start);
        let Served { result, notes } = call(inner, req).await;
        // Refused below (the pool full, granted too late): nothing was
        // sent, so the requests and tokens go back with the grant.
        let Pooled { tried, pool } = match result {
            Ok(pooled) => pooled,
            Err(f) => {
                let mut grant = grant;
                grant.settle(0);
                return Served::err(f, notes);
            }
        };
        let mut limits = RateLimitHeaders::default();
        if let Ok(response) = &tried.sent {
            let status = response.status().as_u16();
            limits = match plan.provider {
                Some(p) => p.rate_limits(response.headers(), SystemTime::now()),
                None => upstream_limits(response.headers()),
            };
            let _ = state
                .limits
                .shared
                .observe(
                    Some(&grant),
                    Some(&plan.requests),
                    plan.tokens.as_deref(),
                    status,
                    &limits,
                )
                .await;
        }
        let granted = Granted {
            tried,
            pool,
            grant,
            retry_after: limits.retry_after,
        };
        Served::ok(granted, notes)
    }
}

/// An API's own rate-limit headers (every convention the parser knows).
pub(crate) fn upstream_limits(headers: &reqwest::header::HeaderMap) -> RateLimitHeaders {
    RateLimitHeaders::parse(
        headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?))),
        SystemTime::now(),
    )
}

#[cfg(test)]
#[path = "limits/tests.rs"]
mod tests;
