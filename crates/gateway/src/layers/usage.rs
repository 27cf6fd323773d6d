//! Usage settle: the tokens a call reserved (its estimate) are settled
//! with what its answer reports it used, once the answer has been read —
//! at once for a whole answer, when the stream ends for a streamed one.
//! An answer that reports nothing leaves the estimate standing; a stream
//! cut before its end settles what it used so far ([`super::provider`]).
//!
//! The layer hands the call's grant up as a [`Reserved`], so that nothing
//! above it can release the grant without settling it. An answer takes
//! the call's budget reservation from the notes with it (priced at the
//! model that answered), settled with the same usage.

use std::sync::Arc;
use std::time::Duration;

use sluice_admit::BulkheadPermit;
use sluice_limit::Permit;
use sluice_usage::{Details, Usage, UsageCeiling};

use super::failure::Failure;
use super::step::{Step, StepLayer};
use super::upstream::{Answered, Upstream};
use super::{Next, Req, Served, call};
use crate::budgets::Priced;
use crate::state::AppState;

/// The tokens reserved for a call, held until its usage is known.
#[derive(Debug)]
pub(crate) struct Reserved {
    grant: Permit,
    /// The resources the tokens were reserved on.
    tokens: Vec<String>,
    /// The call's budget reservation, if its caller has budgets.
    budget: Option<Priced>,
}

impl Reserved {
    /// Settles the reservation of a call answered with `usage` (the
    /// estimate stands without it) and releases the grant; an answer
    /// that is a failure and reports no usage cost nothing against the
    /// budgets.
    pub(crate) fn settle_answer(self, usage: Option<Usage>, success: bool) {
        self.settle_apart(usage, usage, success);
    }

    /// Settles the token limits at `used` and the budgets at `charged`
    /// (a stream without its final usage: the limits take back what it
    /// did not send, the budgets charge what the upstream may have billed
    /// unseen; see `provider/stream.rs`). `None` leaves the estimate
    /// standing, or gives it all back to the budgets of a failure.
    pub(crate) fn settle_apart(
        mut self,
        used: Option<Usage>,
        charged: Option<Usage>,
        success: bool,
    ) {
        if let Some(u) = used {
            for t in &self.tokens {
                let _ = self.grant.settle_part(t, u.total_tokens);
            }
        }
        if let Some(b) = self.budget.take() {
            b.settle(charged, success);
        }
    }
}

/// `usage` and `details` as an upstream reported them, clamped to what
/// the call could use (`ceiling`): a figure above it is neither billed
/// nor charged to the token buckets as claimed, but counted
/// (`sluice_usage_clamped_total`) and logged.
pub(crate) fn bounded(
    ceiling: &UsageCeiling,
    provider: &str,
    model: &str,
    usage: Option<Usage>,
    details: &mut Details,
) -> Option<Usage> {
    let mut u = usage?;
    let claimed = u;
    if let Some(field) = ceiling.clamp(&mut u, details) {
        crate::metrics::usage_clamped(provider, field);
        tracing::warn!(
            provider,
            model,
            field,
            claimed_prompt = claimed.prompt_tokens,
            claimed_completion = claimed.completion_tokens,
            prompt = u.prompt_tokens,
            completion = u.completion_tokens,
            "the upstream reported more usage than the call could use: clamped"
        );
    }
    Some(u)
}

/// An answer to deliver, with what it holds until it is delivered.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub response: crate::client::UpstreamResponse,
    pub reserved: Reserved,
    pub pool: BulkheadPermit,
    pub attempts: u32,
    /// Time spent waiting for the limiter and the pool.
    pub waited: Duration,
}

/// Wraps a stack in [`Settle`].
pub(crate) type UsageLayer = StepLayer<Settle>;

/// See the module doc.
pub(crate) enum Settle {}

impl<S> Step<Req<Arc<Upstream>>, S> for Settle
where
    S: Next<Req<Arc<Upstream>>, Served<Answered, Failure>>,
{
    type Response = Served<Delivery, Failure>;

    async fn serve(
        state: AppState,
        inner: S,
        req: Req<Arc<Upstream>>,
    ) -> Served<Delivery, Failure> {
        let tokens = req.call.plan.settle.clone();
        // Priced only for a call with a budget reservation to settle (the
        // table is a scan of every price's prefix).
        let price = req
            .notes
            .budget
            .as_ref()
            .and_then(|_| state.spend.prices.price(&req.call.plan.name).copied());
        let Served { result, mut notes } = call(inner, req).await;
        // An answer came: it settles the budgets (a failure leaves the
        // reservation in the notes, for another candidate or the
        // budget layer to give back).
        let budget = match &result {
            Ok(_) => notes.budget.take().map(|hold| Priced { hold, price }),
            Err(_) => None,
        };
        let result = result.map(|a| Delivery {
            response: a.response,
            reserved: Reserved {
                grant: a.grant,
                tokens,
                budget,
            },
            pool: a.pool,
            attempts: a.attempts,
            waited: a.waited,
        });
        Served { result, notes }
    }
}

#[cfg(test)]
#[path = "usage/tests.rs"]
mod tests;
