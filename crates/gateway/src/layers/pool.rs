//! Pool: a call for a pooled model (`[[pools]]`) goes to the deployment
//! that can take it soonest ([`crate::pools::Pool::choose`]), then down the
//! same stack as any call (provider, usage, retry, limits, bulkhead, wire)
//! limited on that deployment's own resources. A deployment that fails
//! it (5xx, timeout, refused connection, 429) gives the call back at once
//! (`Plan::once`), and it goes to another deployment first; its circuit
//! counts the failure. Calls for other models pass through untouched.
//!
//! It sits below fallback (a pool is one candidate model, whatever its
//! deployments) and above provider (each deployment has its own provider,
//! wire format and key).

use std::time::Duration;

use tokio::time::Instant;

use super::failure::Failure;
use super::model_call::Attempt;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call};
use crate::error::ApiError;
use crate::pools::Outcome;
use crate::providers;
use crate::state::AppState;

/// Wraps a stack in [`Pool`].
pub(crate) type PoolLayer = StepLayer<Pool>;

/// See the module doc.
pub(crate) enum Pool {}

impl<S> Step<Req<Attempt>, S> for Pool
where
    S: Next<Req<Attempt>, Served<Reply, Failure>>,
{
    type Response = Served<Reply, Failure>;

    async fn serve(state: AppState, inner: S, req: Req<Attempt>) -> Served<Reply, Failure> {
        let Some(pool) = state
            .config
            .pool_index(&req.call.model)
            .and_then(|i| state.limits.pools.get(i))
        else {
            return call(inner, req).await;
        };
        let Req { call: a, mut notes } = req;
        let retry = &state.config.retry;
        let max_attempts = retry.max_attempts.max(1);
        let last_send = {
            let floor = Duration::from_millis(retry.min_time_left_ms);
            let deadline = a.call.ctx.deadline;
            deadline.checked_sub(floor).unwrap_or(deadline)
        };
        let endpoint = a.call.endpoint;
        let serves: Vec<bool> = pool
            .deployments
            .iter()
            .map(|d| {
                providers::for_format(state.config.providers[d.provider].format).serves(endpoint)
            })
            .collect();
        // Deployments this call failed on: skipped while another is left.
        let mut failed_on = vec![false; pool.deployments.len()];
        let mut attempts = 0u32;
        loop {
            let fresh = (0..serves.len()).any(|j| serves[j] && !failed_on[j]);
            if !fresh {
                failed_on.fill(false);
            }
            let chosen = pool
                .choose(&state.limits.shared, |j| serves[j] && !failed_on[j])
                .await;
            let chosen = match chosen {
                Ok(c) => c,
                Err(all_open) => {
                    // Every circuit is open: wait for the first probe
                    // rather than refuse, while the deadline allows.
                    if Instant::now() + all_open.retry_in >= last_send {
                        let e = ApiError::Unavailable {
                            message: format!(
                                "every deployment of the pool {:?} is failing",
                                pool.model
                            ),
                            retry_after: Some(all_open.retry_in),
                        };
                        return Served::err(Failure::Limited(e), notes);
                    }
                    tokio::select! {
                        biased;
                        () = state.grace.over() => {
                            return Served::err(crate::state::Grace::ended(), notes);
                        }
                        () = tokio::time::sleep(all_open.retry_in) => {}
                    }
                    continue;
                }
            };
            let deployment = &pool.deployments[chosen.index];
            let in_flight = pool.enter(chosen);
            let attempt = Attempt {
                deployment: Some(chosen.index),
                ..a.clone()
            };
            let served = call(
                inner.clone(),
                Req {
                    call: attempt,
                    notes,
                },
            )
            .await;
            notes = served.notes;
            let f = match served.result {
                Ok(reply) => {
                    in_flight.ended(Outcome::Answered);
                    // The answer's own attempt is counted by provider.
                    notes.meta.attempts += attempts;
                    crate::metrics::pool_attempt(&pool.model, &deployment.resource, "answered");
                    return Served::ok(reply, notes);
                }
                Err(f) => f,
            };
            attempts += f.attempts();
            let (outcome, label) = match &f {
                Failure::Upstream { .. } => (Outcome::Failed, "failed"),
                // A timeout of an attempt the deployment did not answer
                // in time; one of the deadline is nobody's failure.
                Failure::Timeout { attempts: n } if *n > 0 => (Outcome::Failed, "timeout"),
                Failure::Throttled { .. } => (Outcome::Neither, "throttled"),
                Failure::Timeout { .. } | Failure::Limited(_) => (Outcome::Neither, "refused"),
            };
            in_flight.ended(outcome);
            crate::metrics::pool_attempt(&pool.model, &deployment.resource, label);
            // Refused before it was sent (the limiter's wait too long, the
            // call too large, the pool of connections full): another
            // deployment was no sooner, so the refusal stands.
            let sent = f.attempts() > 0;
            if !sent || attempts >= max_attempts || Instant::now() >= last_send {
                return Served::err(f.after(attempts), notes);
            }
            failed_on[chosen.index] = true;
            if serves.iter().zip(&failed_on).all(|(s, f)| !s || *f) {
                // Every deployment failed this call once: back off
                // before the next round, as a retry of one upstream does.
                let wait = super::retry::backoff(retry, attempts);
                if Instant::now() + wait >= last_send {
                    return Served::err(f.after(attempts), notes);
                }
                tokio::select! {
                    biased;
                    () = state.grace.over() => {
                        return Served::err(crate::state::Grace::ended(), notes);
                    }
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "pool/tests.rs"]
mod tests;
