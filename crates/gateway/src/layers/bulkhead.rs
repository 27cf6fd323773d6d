//! Bulkhead: a call takes a slot of its workload's pool (`model`, `api`)
//! before it is sent, and keeps it across its attempts until its answer
//! is delivered, so one workload cannot take every connection; and one
//! tenant at most its share of the pool's slots, so one tenant cannot
//! take every slot of a workload (issue 33).
//!
//! Having cleared the limiter and the pool, the request gives its
//! admission slot back: the queue orders who goes to the limiter next,
//! and a long upstream call should not hold a dispatch slot.

use super::failure::Failure;
use super::step::{Step, StepLayer};
use super::upstream::{Pooled, Tried, Try};
use super::{Next, Req, Served, call, observe};
use crate::state::AppState;

/// Wraps a stack in [`Bulkhead`].
pub(crate) type BulkheadLayer = StepLayer<Bulkhead>;

/// See the module doc.
pub(crate) enum Bulkhead {}

impl<S> Step<Req<Try>, S> for Bulkhead
where
    S: Next<Req<Try>, Served<Tried, Failure>>,
{
    type Response = Served<Pooled, Failure>;

    async fn serve(state: AppState, inner: S, req: Req<Try>) -> Served<Pooled, Failure> {
        let Req {
            call: mut t,
            mut notes,
        } = req;
        let pool = match t.pool.take() {
            Some(held) => held,
            None => {
                let plan = &t.upstream.plan;
                let pool = state.admission.bulkheads.get(plan.pool);
                // With tenants, each holds at most its share of the pool
                // (`bulkheads.{pool}.max_per_tenant`); without, every
                // caller is one trusted user.
                let tenant = if state.is_open() {
                    None
                } else {
                    notes.tenant.as_deref()
                };
                let acquire = pool.acquire_for(tenant, t.upstream.deadline);
                let Some(acquired) = state.grace.unless_over(acquire).await else {
                    return Served::err(crate::state::Grace::ended(), notes);
                };
                match acquired {
                    Ok(p) => p,
                    Err(e) => {
                        observe::refused(&plan.requests, "pool_full");
                        return Served::err(crate::error::ApiError::from(e), notes);
                    }
                }
            }
        };
        if let Some(slot) = notes.admission.as_mut() {
            slot.dispatched();
        }
        let Served { result, notes } = call(inner, Req { call: t, notes }).await;
        Served {
            result: result.map(|tried| Pooled { tried, pool }),
            notes,
        }
    }
}

#[cfg(test)]
#[path = "bulkhead/tests.rs"]
mod tests;
