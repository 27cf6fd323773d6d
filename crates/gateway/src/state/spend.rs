//! [`Spend`]: what calls cost and what they may spend — prices, budgets
//! and their count — and the response cache that saves calls.

use std::sync::Arc;

use sluice_usage::PriceTable;
use sluice_usage::budget::BudgetStore;

use crate::budgets::{CallerRules, Seeder};
use crate::cache::{Flights, SharedCache, TenantCounters};
use crate::config::Config;
use crate::error::StartError;

/// The spend substate.
#[derive(Debug)]
pub(crate) struct Spend {
    /// What models cost: the shipped prices with `[prices]` over them
    /// (the ledger's costs, budgets' reservations).
    pub(crate) prices: PriceTable,
    /// Where budgets' spend is counted: here, or in Redis with `[redis]`.
    pub(crate) budgets: Arc<dyn BudgetStore>,
    /// Reads budgets' past spend from the ledger when they are counted
    /// here (`None` with `[redis]`, which keeps it).
    pub(crate) budget_seed: Option<Seeder>,
    /// Callers' budgets as the count's rules, kept between requests.
    pub(crate) budget_rules: CallerRules,
    /// The response cache, in memory or in Redis (`[cache]`).
    pub(crate) cache: SharedCache,
    /// What the cache did for each tenant.
    pub(crate) cache_tenants: Arc<TenantCounters>,
    /// Identical cache misses in flight together.
    pub(crate) cache_flights: Arc<Flights>,
}

impl Spend {
    /// The prices, budgets and cache `config` sets.
    ///
    /// # Errors
    /// [`StartError::Cache`], [`StartError::Prices`],
    /// [`StartError::Budgets`].
    pub(crate) fn build(config: &Config) -> Result<Arc<Spend>, StartError> {
        let cache = crate::cache::build(config).map_err(|e| StartError::Cache(e.into()))?;
        let prices = crate::config::price_table(&config.pricing, &config.prices)?;
        let (budgets, budget_seed) =
            crate::budgets::store(config).map_err(|e| StartError::Budgets(e.into()))?;
        Ok(Arc::new(Spend {
            prices,
            budgets,
            budget_seed,
            budget_rules: CallerRules::default(),
            cache,
            cache_tenants: Arc::default(),
            cache_flights: Arc::default(),
        }))
    }
}
