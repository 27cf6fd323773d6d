//! Budgets counted in this process (no `[redis]`) start again from the
//! usage ledger after a restart: the first time a budget is asked for
//! room, what its owner spent since the start of its window is read from
//! the ledger's records and added to the count, slice by slice. A
//! restart therefore resets nothing that the ledger recorded.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use sluice_keys::Caller;
use sluice_ledger::LedgerStore;
use sluice_usage::budget::{MemoryBudgets, Rule, Spend};

use super::Scope;
use crate::error::chain;

/// Reads a budget's past spend from the ledger once, before its first
/// reservation in this process.
#[derive(Debug)]
pub(crate) struct Seeder {
    memory: Arc<MemoryBudgets>,
    /// The rules whose past spend has been read: at most one entry per
    /// budget that exists.
    seeded: Mutex<HashSet<String>>,
    /// One reading at a time, so that two first calls of a budget do not
    /// both add its past.
    reading: tokio::sync::Mutex<()>,
}

impl Seeder {
    pub(crate) fn new(memory: Arc<MemoryBudgets>) -> Seeder {
        Seeder {
            memory,
            seeded: Mutex::default(),
            reading: tokio::sync::Mutex::new(()),
        }
    }

    fn unseeded(&self, rules: &[Rule]) -> bool {
        let seeded = self.seeded.lock().unwrap_or_else(PoisonError::into_inner);
        rules.iter().any(|r| !seeded.contains(&r.id))
    }

    /// Adds the past spend of those of `rules` (all of `caller`) that have
    /// not been read yet. A ledger that cannot be read is logged, and the
    /// budget counts from now.
    pub(crate) async fn ensure(
        &self,
        ledger: &LedgerStore,
        caller: &Caller,
        rules: &[Rule],
        now_ms: i64,
    ) {
        if !self.unseeded(rules) {
            return;
        }
        let _one = self.reading.lock().await;
        for rule in rules {
            if !self.unseeded(std::slice::from_ref(rule)) {
                continue;
            }
            let key = (Scope::of(&rule.id) == Scope::Key).then_some(&*caller.key_id);
            let from = rule.window.slices(now_ms).oldest;
            match ledger.spent(&caller.tenant, key, from, now_ms + 1).await {
                Ok(minutes) => {
                    // A minute that began before the window counts from
                    // its start: the records read are all inside it.
                    let spent: Vec<(i64, Spend)> = minutes
                        .iter()
                        .map(|m| {
                            let spend = Spend {
                                money: m.cost_nanos,
                                tokens: m.tokens,
                                requests: m.requests,
                            };
                            (m.minute_ms.max(from), spend)
                        })
                        .collect();
                    self.memory.seed(rule, &spent, now_ms);
                }
                Err(e) => tracing::warn!(
                    budget = %rule.id,
                    error = %chain(&e),
                    "the budget's past spend could not be read from the ledger: it counts from now"
                ),
            }
            self.seeded
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(rule.id.clone());
        }
    }
}
