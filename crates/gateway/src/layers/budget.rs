//! Budget: once admitted, a model call of a key with budgets (its own,
//! its tenant's, their tiers') reserves its worst case in all of them at
//! once — its prompt's estimate plus its `max_tokens` (or the configured
//! default), at the dearest price of its model and fallbacks — or is
//! refused with a 429 that names the budget and when it resets
//! (`Retry-After`). The reservation goes down in the notes; the usage
//! layer hands it to the answer, which settles it to what the call used.
//! A call that fails before an answer gives it all back here.
//!
//! It sits below admission so that a request that joins an identical one
//! in flight spends nothing, and below the cache, whose hits spend
//! nothing either.
//!
//! Proxied API calls pass the same layer ([`Budgeted`] says what a call
//! asks): they count in request budgets only (one request each; an API's
//! answer carries no tokens and has no price), kept once the API answered
//! without an error status and given back otherwise, as a model call's.
//! MCP tool calls count the same way ([`reserve_request`], from
//! `layers/mcp/call.rs`, which has no layer stack).

use std::sync::Arc;
use std::time::Duration;

use sluice_usage::Usage;
use sluice_usage::budget::{BudgetError, Dimension, Hold, Rule, Spend};

use super::context::Context;
use super::model_call::Call;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call};
use crate::budgets::{self, Scope, WARN_AT};
use crate::error::ApiError;
use crate::metrics;
use crate::providers;
use crate::response::BudgetNote;
use crate::state::AppState;

/// Wraps a stack in [`Budget`].
pub(crate) type BudgetLayer = StepLayer<Budget>;

/// See the module doc.
pub(crate) enum Budget {}

/// A call that budgets count.
pub(crate) trait Budgeted: Send + Sync + 'static {
    /// The request's context (its caller).
    fn ctx(&self) -> &Context;

    /// Whether `rule` counts calls of this kind.
    fn counts_in(rule: &Rule) -> bool;

    /// The most the call can spend against `rules`.
    ///
    /// # Errors
    /// A call that cannot be held to them (a model without a price
    /// against a money budget).
    fn worst_case(&self, state: &AppState, rules: &[Rule]) -> Result<Spend, ApiError>;

    /// Whether a reservation that no layer below took to settle stays
    /// spent, given the answer.
    fn keeps(result: &Result<Reply, ApiError>) -> bool;
}

impl Budgeted for Box<Call> {
    fn ctx(&self) -> &Context {
        &self.ctx
    }

    fn counts_in(_: &Rule) -> bool {
        true
    }

    fn worst_case(&self, state: &AppState, rules: &[Rule]) -> Result<Spend, ApiError> {
        worst_case(state, self, rules)
    }

    /// An answer takes the reservation (and settles it); one still here
    /// had none: the call failed without costing anything.
    fn keeps(_: &Result<Reply, ApiError>) -> bool {
        false
    }
}

impl<C, S> Step<Req<C>, S> for Budget
where
    C: Budgeted,
    S: Next<Req<C>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: Req<C>) -> Served<Reply> {
        let Req { call: c, mut notes } = req;
        let rules: Arc<[Rule]> = match &c.ctx().caller {
            Some(caller) if !caller.key_budgets.is_empty() || !caller.tenant_budgets.is_empty() => {
                let rules = state.spend.budget_rules.of(caller);
                if rules.iter().all(C::counts_in) {
                    rules
                } else {
                    rules.iter().filter(|r| C::counts_in(r)).cloned().collect()
                }
            }
            _ => Arc::from([]),
        };
        if rules.is_empty() {
            // No budget: nothing to count, nothing to wait for.
            return call(inner, Req { call: c, notes }).await;
        }
        match reserve(&state, &c, &rules).await {
            Ok(Some((hold, note))) => {
                notes.budget = Some(hold);
                notes.meta.budget = Some(note);
            }
            Ok(None) => {}
            Err(e) => return Served::err(e, notes),
        }
        let mut served = call(inner, Req { call: c, notes }).await;
        if let Some(h) = served.notes.budget.take()
            && !C::keeps(&served.result)
        {
            h.release();
        }
        served
    }
}

/// Reserves `c`'s worst case in `rules`. `None` when the shared count
/// cannot be reached and `[redis] failure` is `fail_open`: the call goes
/// on uncounted.
async fn reserve<C: Budgeted>(
    state: &AppState,
    c: &C,
    rules: &[Rule],
) -> Result<Option<(Hold, BudgetNote)>, ApiError> {
    let ask = c.worst_case(state, rules)?;
    let held = reserve_spend(state, c.ctx(), rules, ask).await?;
    Ok(held.and_then(|(hold, note)| note.map(|n| (hold, n))))
}

/// Reserves one request in the request budgets of `ctx`'s caller for an
/// MCP tool call, which, like a proxied call, has no tokens and no price
/// (`None`: no such budget, or the count is away and fails open). The
/// caller keeps the hold when the server answered and releases it
/// otherwise.
///
/// # Errors
/// The 429 naming a budget that has no room left.
pub(crate) async fn reserve_request(
    state: &AppState,
    ctx: &Context,
) -> Result<Option<Hold>, ApiError> {
    let Some(caller) = &ctx.caller else {
        return Ok(None);
    };
    if caller.key_budgets.is_empty() && caller.tenant_budgets.is_empty() {
        return Ok(None);
    }
    let rules: Vec<Rule> = (state.spend.budget_rules.of(caller).iter())
        .filter(|r| r.caps.requests.is_some())
        .cloned()
        .collect();
    if rules.is_empty() {
        return Ok(None);
    }
    let ask = Spend {
        requests: 1,
        ..Spend::default()
    };
    Ok(reserve_spend(state, ctx, &rules, ask)
        .await?
        .map(|(hold, _)| hold))
}

/// Reserves `ask` in `rules` for `ctx`'s caller: the hold, and the note
/// of the budget nearest its cap.
async fn reserve_spend(
    state: &AppState,
    ctx: &Context,
    rules: &[Rule],
    ask: Spend,
) -> Result<Option<(Hold, Option<BudgetNote>)>, ApiError> {
    let now_ms = sluice_ledger::now_ms();
    if let (Some(seed), Some(ledger), Some(caller)) = (
        &state.spend.budget_seed,
        state.observers.ledger.as_ref(),
        &ctx.caller,
    ) {
        seed.ensure(&ledger.store, caller, rules, now_ms).await;
    }
    match state.spend.budgets.reserve(rules, ask, now_ms).await {
        Ok((reservation, standing)) => {
            let tightest = standing
                .iter()
                .map(|s| (s.used(ask), s))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            let note = tightest.map(|(used, s)| BudgetNote {
                budget: s.id.clone(),
                used,
                resets_in: Duration::from_millis(
                    u64::try_from(s.resets_at_ms - now_ms).unwrap_or(0),
                ),
            });
            if let Some(n) = &note
                && n.used >= WARN_AT
            {
                metrics::budget_warned(Scope::of(&n.budget).as_str());
            }
            let hold = Hold::new(state.spend.budgets.clone(), reservation);
            Ok(Some((hold, note)))
        }
        Err(BudgetError::Exceeded {
            budget,
            dimension,
            spent,
            cap,
            ask,
            resets_at_ms,
        }) => {
            metrics::budget_refused(Scope::of(&budget).as_str(), "exceeded");
            let wait = Duration::from_millis(u64::try_from(resets_at_ms - now_ms).unwrap_or(0));
            let resets = jiff::Timestamp::from_millisecond(resets_at_ms)
                .map(|t| t.to_string())
                .unwrap_or_default();
            Err(ApiError::BudgetExceeded {
                message: format!(
                    "{} has no room for this call: {} spent of {}, and the call may use up to {}; \
                     it resets at {resets}",
                    named(&budget),
                    amount(dimension, spent),
                    amount(dimension, cap),
                    amount(dimension, ask),
                ),
                retry_after: wait.max(Duration::from_secs(1)),
            })
        }
        Err(BudgetError::TooLarge {
            budget,
            dimension,
            ask,
            cap,
        }) => {
            metrics::budget_refused(Scope::of(&budget).as_str(), "too_large");
            Err(ApiError::TooLarge(format!(
                "this call may use up to {}, above the whole of {} ({}): lower max_tokens or \
                 shorten the prompt",
                amount(dimension, ask),
                named(&budget),
                amount(dimension, cap),
            )))
        }
        Err(BudgetError::Store(e)) => {
            let scope = Scope::of(&rules[0].id).as_str();
            metrics::budget_refused(scope, "store");
            let closed = state
                .config
                .redis
                .as_ref()
                .is_some_and(|r| r.failure == "fail_closed");
            tracing::warn!(error = %e, fail_closed = closed, "budgets cannot be counted");
            if closed {
                return Err(ApiError::Unavailable {
                    message: "budgets cannot be counted (the shared store is away)".into(),
                    retry_after: Some(Duration::from_secs(1)),
                });
            }
            Ok(None)
        }
    }
}

/// The most `c` can cost: its prompt's estimate plus its completion's
/// limit, at the dearest of its model and the fallbacks it may go to,
/// each estimated in its own provider's format (a translated call may
/// have another default limit). Under a money budget every one of them
/// must have a price: a fallback without one would answer for free.
fn worst_case(state: &AppState, c: &Call, rules: &[Rule]) -> Result<Spend, ApiError> {
    let cfg = &state.config.tokens;
    let counts_money = budgets::counts_money(rules);
    let fallbacks = state.config.fallbacks.get(&c.model).into_iter().flatten();
    let mut worst = Spend {
        requests: 1,
        ..Spend::default()
    };
    for model in std::iter::once(&c.model).chain(fallbacks) {
        // Those the fallback layer skips cost nothing (see `fallback.rs`).
        let Ok(prov) = c.provider_for(state, model) else {
            continue;
        };
        if model != &c.model && !c.ctx.allows_model(model) {
            continue;
        }
        let Some(adapter) = providers::for_call(prov.format, c.endpoint) else {
            continue;
        };
        let est = adapter.estimate(
            c.endpoint,
            &c.json,
            cfg.chars_per_token,
            cfg.default_max_tokens,
        );
        worst.tokens = worst.tokens.max(est.total);
        if !counts_money {
            continue;
        }
        let price = state.spend.prices.price(model).ok_or_else(|| {
            metrics::budget_refused(Scope::of(&rules[0].id).as_str(), "unpriced");
            let which = if model == &c.model {
                String::new()
            } else {
                format!(" (a fallback of {:?})", c.model)
            };
            ApiError::Forbidden(format!(
                "model {model:?}{which} has no price, so a money budget cannot be kept for it: \
                 price it in the config (`[prices.{model:?}]` with `input` and `output` in \
                 dollars per million tokens) or point `[pricing] catalog` at a price map that \
                 has it (`sluice prices refresh`)"
            ))
        })?;
        let usage = Usage {
            prompt_tokens: est.prompt_tokens,
            completion_tokens: est.max_completion_tokens,
            total_tokens: est.total,
        };
        worst.money = worst.money.max(price.cost(&usage, 0).nanodollars());
    }
    Ok(worst)
}

/// `budget "monthly" of tenant "acme"` from `tenant:acme:monthly`.
fn named(id: &str) -> String {
    let (owner, name) = id.rsplit_once(':').unwrap_or(("", id));
    let (scope, who) = owner.split_once(':').unwrap_or((owner, ""));
    format!("budget {name:?} of {scope} {who:?}")
}

/// An amount as people read it: dollars for money.
fn amount(d: Dimension, n: u64) -> String {
    match d {
        Dimension::Money => sluice_usage::Cost::from_nanodollars(n).to_string(),
        Dimension::Tokens => format!("{n} tokens"),
        Dimension::Requests => format!("{n} requests"),
    }
}

#[cfg(test)]
#[path = "budget/tests.rs"]
mod tests;
