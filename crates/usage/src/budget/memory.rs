//! [`MemoryBudgets`]: the count in this process (one gateway).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::{
    BudgetError, BudgetStore, Part, Reservation, ReserveFuture, Rule, Spend, Standing, exceeded,
    short, too_large,
};

/// Budgets kept at once before those whose spend stopped counting are
/// swept out.
const SWEEP_ABOVE: usize = 100_000;

/// One budget's spend, by slice start.
#[derive(Debug, Default)]
struct Count {
    slices: Vec<(i64, Spend)>,
    /// When the newest slice stops counting.
    expires: i64,
}

/// Budgets counted in this process: a mutex over a map, held for a few
/// additions per call. Spend is lost at restart unless it is given back
/// with [`MemoryBudgets::seed`] (the gateway reads it from its usage
/// ledger).
#[derive(Debug, Default)]
pub struct MemoryBudgets {
    counts: Mutex<HashMap<String, Count>>,
}

impl MemoryBudgets {
    /// An empty count.
    pub fn new() -> MemoryBudgets {
        MemoryBudgets::default()
    }

    /// [`BudgetStore::reserve`], without a future.
    ///
    /// # Errors
    /// [`BudgetError::Exceeded`] or [`BudgetError::TooLarge`] naming the
    /// first budget without room; nothing is reserved then.
    pub fn reserve_now(
        &self,
        rules: &[Rule],
        ask: Spend,
        now_ms: i64,
    ) -> Result<(Reservation, Vec<Standing>), BudgetError> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.len() > SWEEP_ABOVE {
            counts.retain(|_, c| c.expires > now_ms);
        }
        let mut standing = Vec::with_capacity(rules.len());
        for rule in rules {
            too_large(rule, ask)?;
        }
        for rule in rules {
            let slices = rule.window.slices(now_ms);
            // A budget not counted yet has spent nothing: it is added
            // below, once the call is sure to be admitted.
            let (spent, oldest) = match counts.get_mut(&rule.id) {
                Some(count) => {
                    count.slices.retain(|(start, _)| *start >= slices.oldest);
                    let oldest = count
                        .slices
                        .iter()
                        .filter(|(_, s)| *s != Spend::default())
                        .map(|(start, _)| *start)
                        .min();
                    (sum(&count.slices), oldest)
                }
                None => (Spend::default(), None),
            };
            if let Some(dim) = short(rule, spent, ask) {
                return Err(exceeded(
                    rule,
                    &slices,
                    dim,
                    spent.amounts()[dim],
                    ask,
                    oldest,
                ));
            }
            standing.push(Standing {
                id: rule.id.clone(),
                spent,
                caps: rule.caps,
                resets_at_ms: slices.expires,
            });
        }
        let mut parts = Vec::with_capacity(rules.len());
        for rule in rules {
            let slices = rule.window.slices(now_ms);
            if !counts.contains_key(&rule.id) {
                counts.insert(rule.id.clone(), Count::default());
            }
            let Some(count) = counts.get_mut(&rule.id) else {
                continue;
            };
            add(&mut count.slices, slices.current, ask, Spend::default());
            count.expires = count.expires.max(slices.expires);
            parts.push(Part {
                id: rule.id.clone(),
                slice: slices.current,
                expires: slices.expires,
            });
        }
        Ok((Reservation { parts, amount: ask }, standing))
    }

    /// [`BudgetStore::adjust`]. A slice that stopped counting meanwhile
    /// is gone, and so is what the settle would have changed in it.
    pub fn adjust_now(&self, r: &Reservation, actual: Spend) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        for p in &r.parts {
            if let Some(count) = counts.get_mut(&p.id)
                && count.slices.iter().any(|(s, _)| *s == p.slice)
            {
                add(&mut count.slices, p.slice, actual, r.amount);
            }
        }
    }

    /// Adds spend made before this count began — read back from the
    /// usage ledger after a restart — to `rule`: each `(at_ms, spend)`
    /// goes to the slice holding `at_ms`; what no longer counts at
    /// `now_ms`, or is after it, is left out.
    pub fn seed(&self, rule: &Rule, spent: &[(i64, Spend)], now_ms: i64) {
        let now = rule.window.slices(now_ms);
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(rule.id.clone()).or_default();
        let live = spent
            .iter()
            .filter(|(at, _)| (now.oldest..=now_ms).contains(at));
        for &(at, s) in live {
            let slice = rule.window.slices(at).current;
            add(&mut count.slices, slice, s, Spend::default());
        }
        count.expires = count.expires.max(now.expires);
    }

    /// What budget `id` counts at `now_ms`, per the slices of `rule`
    /// (for tests and status pages).
    pub fn spent(&self, rule: &Rule, now_ms: i64) -> Spend {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let oldest = rule.window.slices(now_ms).oldest;
        counts.get(&rule.id).map_or_else(Spend::default, |c| {
            let live: Vec<_> = c
                .slices
                .iter()
                .copied()
                .filter(|(s, _)| *s >= oldest)
                .collect();
            sum(&live)
        })
    }
}

fn sum(slices: &[(i64, Spend)]) -> Spend {
    let mut total = [0u64; 3];
    for (_, s) in slices {
        for (t, a) in total.iter_mut().zip(s.amounts()) {
            *t = t.saturating_add(a);
        }
    }
    Spend::from_amounts(total)
}

/// Adds `plus - minus` to slice `at` (created if need be), never below 0.
fn add(slices: &mut Vec<(i64, Spend)>, at: i64, plus: Spend, minus: Spend) {
    let i = match slices.iter().position(|(s, _)| *s == at) {
        Some(i) => i,
        None => {
            slices.push((at, Spend::default()));
            slices.len() - 1
        }
    };
    let mut a = slices[i].1.amounts();
    for ((v, p), m) in a.iter_mut().zip(plus.amounts()).zip(minus.amounts()) {
        *v = v.saturating_add(p).saturating_sub(m);
    }
    slices[i].1 = Spend::from_amounts(a);
}

impl BudgetStore for MemoryBudgets {
    fn reserve<'a>(&'a self, rules: &'a [Rule], ask: Spend, now_ms: i64) -> ReserveFuture<'a> {
        let r = self.reserve_now(rules, ask, now_ms);
        Box::pin(std::future::ready(r))
    }

    fn adjust(&self, r: &Reservation, actual: Spend) {
        self.adjust_now(r, actual);
    }
}
