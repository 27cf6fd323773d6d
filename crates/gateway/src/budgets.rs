//! Budgets in the gateway: where their spend is counted (this process,
//! or Redis with `[redis]`, shared by every replica), the rules of a
//! caller's key and tenant, and what a call costs against them at the
//! gateway's prices. The layer that reserves and refuses is
//! `layers/budget.rs`; the settle is in `layers/usage.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sluice_keys::{Budget, Caller, Period};
use sluice_usage::budget::{
    self as b, BudgetStore, Caps, Hold, MemoryBudgets, RedisBudgets, Rule, Spend, Window,
};
use sluice_usage::{Price, Usage};

use crate::config::Config;

mod seed;

pub(crate) use seed::Seeder;

/// The share of a cap past which answers carry a warning.
pub(crate) const WARN_AT: f64 = 0.8;

/// The count `config` asks for: in Redis with `[redis]`, else here, with
/// the [`Seeder`] that reads its past from the ledger.
///
/// # Errors
/// The Redis URL when it cannot be parsed.
pub(crate) fn store(config: &Config) -> Result<(Arc<dyn BudgetStore>, Option<Seeder>), String> {
    match &config.redis {
        Some(r) => RedisBudgets::new(&r.url, &r.prefix, Duration::from_millis(r.timeout_ms))
            .map(|s| (Arc::new(s) as Arc<dyn BudgetStore>, None))
            .map_err(|e| format!("[redis] url for budgets: {e}")),
        None => {
            let memory = Arc::new(MemoryBudgets::new());
            Ok((memory.clone(), Some(Seeder::new(memory))))
        }
    }
}

/// Who owns a rule, as refusals and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Key,
    Tenant,
}

impl Scope {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Scope::Key => "key",
            Scope::Tenant => "tenant",
        }
    }

    /// The scope of a rule id (`key:…` or `tenant:…`).
    pub(crate) fn of(id: &str) -> Scope {
        if id.starts_with("key:") {
            Scope::Key
        } else {
            Scope::Tenant
        }
    }
}

/// Callers' rules kept between their requests: a caller resolved once
/// (the key cache keeps it until its key, tenant or a tier changes) has
/// its rules made once, and its calendar periods' midnights worked out
/// once per period rather than at every reservation.
#[derive(Debug, Default)]
pub(crate) struct CallerRules {
    /// By key id: the caller the rules were made of, and its rules.
    made: Mutex<HashMap<Arc<str>, Made>>,
}

/// A caller and the rules made of it.
type Made = (Arc<Caller>, Arc<[Rule]>);

/// Callers whose rules are kept; past it they are made again as they
/// come.
const MAX_CALLERS: usize = 10_000;

impl CallerRules {
    /// The rules of `caller` ([`rules`]), made again only for a caller
    /// the key cache resolved anew.
    pub(crate) fn of(&self, caller: &Arc<Caller>) -> Arc<[Rule]> {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((c, r)) = made.get(&caller.key_id)
            && Arc::ptr_eq(c, caller)
        {
            return r.clone();
        }
        let r: Arc<[Rule]> = rules(caller).into();
        if made.len() >= MAX_CALLERS {
            made.clear();
        }
        made.insert(caller.key_id.clone(), (caller.clone(), r.clone()));
        r
    }
}

/// The rules of `caller`: its key's budgets (`key:{id}:{name}`, spent by
/// the key alone) and its tenant's (`tenant:{name}:{name}`, spent by all
/// its keys together).
pub(crate) fn rules(caller: &Caller) -> Vec<Rule> {
    let key = caller
        .key_budgets
        .iter()
        .map(|b| rule(&format!("key:{}", caller.key_id), b));
    let tenant = caller
        .tenant_budgets
        .iter()
        .map(|b| rule(&format!("tenant:{}", caller.tenant), b));
    key.chain(tenant).collect()
}

fn rule(owner: &str, budget: &Budget) -> Rule {
    let window = match (budget.period, budget.window_seconds) {
        (_, Some(s)) => Window::Rolling {
            ms: i64::try_from(s.saturating_mul(1_000)).unwrap_or(i64::MAX),
        },
        (period, None) => Window::calendar(
            match period.unwrap_or(Period::Month) {
                Period::Day => b::Period::Day,
                Period::Week => b::Period::Week,
                Period::Month => b::Period::Month,
            },
            // Checked when the budget was stored; a zone the system has
            // since lost counts in UTC rather than not at all.
            budget
                .time_zone
                .as_deref()
                .and_then(|tz| jiff::tz::TimeZone::get(tz).ok())
                .unwrap_or(jiff::tz::TimeZone::UTC),
        ),
    };
    Rule {
        id: format!("{owner}:{}", budget.name),
        caps: Caps {
            money: budget.money.map(sluice_keys::Money::nanodollars),
            tokens: budget.tokens,
            requests: budget.requests,
        },
        window,
    }
}

/// Whether any of `rules` counts money.
pub(crate) fn counts_money(rules: &[Rule]) -> bool {
    rules.iter().any(|r| r.caps.money.is_some())
}

/// What `usage` cost at `price` (no price: no money).
pub(crate) fn spend(price: Option<&Price>, usage: &Usage) -> Spend {
    Spend {
        money: price.map_or(0, |p| p.cost(usage, 0).nanodollars()),
        tokens: usage.total_tokens,
        requests: 1,
    }
}

/// A call's budget reservation on its way to its answer, with the price
/// of the model that answered once one did.
#[derive(Debug)]
pub(crate) struct Priced {
    pub hold: Hold,
    pub price: Option<Price>,
}

impl Priced {
    /// Settles to `usage`; none reported: on a success the worst case
    /// stands (as the token limits' estimate does), on a failure the call
    /// cost nothing and everything goes back.
    pub(crate) fn settle(self, usage: Option<Usage>, success: bool) {
        match usage {
            Some(u) => self.hold.settle(spend(self.price.as_ref(), &u)),
            None if !success => self.hold.release(),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_is_the_price_tables_cost() {
        let prices = sluice_usage::PriceTable::defaults();
        let u = Usage {
            prompt_tokens: 1_000,
            completion_tokens: 500,
            total_tokens: 1_500,
        };
        let model = "openai/gpt-4o-mini";
        let s = spend(prices.price(model), &u);
        assert_eq!(
            s.money,
            prices.cost(model, &u, 0).unwrap().nanodollars(),
            "one arithmetic for budgets and the ledger"
        );
        assert_eq!((s.tokens, s.requests), (1_500, 1));
        assert_eq!(spend(None, &u).money, 0);
    }
}
