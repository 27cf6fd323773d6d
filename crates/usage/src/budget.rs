//! Budgets: spend counted against caps of money, tokens and requests over
//! a calendar period or a rolling window, with reserve-then-settle.
//!
//! A call reserves its worst case before it is sent (its prompt's
//! estimate plus its `max_tokens`, at its model's price), in one atomic
//! step over all of its budgets: either every budget has room for it and
//! the reservation counts as spent at once, or none is touched and the
//! refusal names the budget that is short. The call then settles to what
//! it really used, which gives back the difference (a call that failed
//! and cost nothing gives back all of it).
//!
//! **Overshoot bound.** A reservation is admitted only while spent plus
//! reserved plus it stays within the cap, so calls in flight can never
//! together be granted more than the cap: spend exceeds it only by what
//! calls use beyond their reservation (an estimate of the prompt that was
//! low; never the completion, which `max_tokens` bounds), and a dropped
//! reservation (a client gone before its answer) keeps its worst case.
//!
//! The count is a [`BudgetStore`]: [`MemoryBudgets`] in this process, or
//! `RedisBudgets` (feature `redis`) shared by every replica, one Lua
//! script per reserve and per settle.
//!
//! ```
//! use sluice_usage::budget::{Caps, MemoryBudgets, Rule, Spend, Window};
//!
//! let budgets = MemoryBudgets::new();
//! let daily = [Rule {
//!     id: "tenant:acme:daily".into(),
//!     caps: Caps { requests: Some(2), ..Caps::default() },
//!     window: Window::Rolling { ms: 86_400_000 },
//! }];
//! let one = Spend { requests: 1, ..Spend::default() };
//! let (first, _) = budgets.reserve_now(&daily, one, 0).unwrap();
//! budgets.reserve_now(&daily, one, 0).unwrap();
//! assert!(budgets.reserve_now(&daily, one, 0).is_err());
//! // The first call failed and cost nothing: its request goes back.
//! budgets.adjust_now(&first, Spend::default());
//! assert!(budgets.reserve_now(&daily, one, 0).is_ok());
//! ```

mod memory;
#[cfg(feature = "redis")]
mod redis;
mod window;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use memory::MemoryBudgets;
#[cfg(feature = "redis")]
pub use redis::RedisBudgets;
pub use window::{Period, ROLLING_SLICES, Slices, Window};

/// Money (nanodollars), tokens and requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spend {
    /// Nanodollars.
    pub money: u64,
    /// Prompt and completion tokens.
    pub tokens: u64,
    /// Calls.
    pub requests: u64,
}

impl Spend {
    /// The amounts as an array, in [`Dimension`] order.
    pub const fn amounts(&self) -> [u64; 3] {
        [self.money, self.tokens, self.requests]
    }

    /// From an array in [`Dimension`] order.
    pub const fn from_amounts(a: [u64; 3]) -> Spend {
        Spend {
            money: a[0],
            tokens: a[1],
            requests: a[2],
        }
    }
}

/// What a budget counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    /// Money.
    Money,
    /// Tokens.
    Tokens,
    /// Requests.
    Requests,
}

impl Dimension {
    /// In [`Spend::amounts`] order.
    pub const ALL: [Dimension; 3] = [Dimension::Money, Dimension::Tokens, Dimension::Requests];

    /// As errors and headers name it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dimension::Money => "money",
            Dimension::Tokens => "tokens",
            Dimension::Requests => "requests",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The caps of a budget; `None` does not count that dimension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Caps {
    /// Nanodollars.
    pub money: Option<u64>,
    /// Tokens.
    pub tokens: Option<u64>,
    /// Requests.
    pub requests: Option<u64>,
}

impl Caps {
    /// The caps as an array, in [`Dimension`] order.
    pub const fn caps(&self) -> [Option<u64>; 3] {
        [self.money, self.tokens, self.requests]
    }
}

/// One budget as the store counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Its identity in the store: who owns it and its name
    /// (`tenant:acme:monthly`). Two rules with one id share one count.
    pub id: String,
    /// Its caps.
    pub caps: Caps,
    /// When its count starts over.
    pub window: Window,
}

/// A budget as a reservation found it: what was spent before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The rule's id.
    pub id: String,
    /// Spent (and reserved) before this reservation.
    pub spent: Spend,
    /// The rule's caps.
    pub caps: Caps,
    /// When the spend of this reservation stops counting (ms since the
    /// epoch): the period's end, or the rolling window's.
    pub resets_at_ms: i64,
}

impl Standing {
    /// The largest share of a cap spent once `ask` is added: 0.0 to 1.0
    /// (above it only for spend beyond a reservation).
    pub fn used(&self, ask: Spend) -> f64 {
        let spent = self.spent.amounts();
        let ask = ask.amounts();
        self.caps
            .caps()
            .iter()
            .enumerate()
            .filter_map(|(i, cap)| {
                cap.map(|c| (spent[i].saturating_add(ask[i])) as f64 / c.max(1) as f64)
            })
            .fold(0.0, f64::max)
    }
}

/// Why a reservation was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The budget has no room for the call before it resets.
    #[error(
        "budget {budget} has no room for the call ({dimension}: {spent} spent of {cap}, {ask} asked)"
    )]
    Exceeded {
        /// The rule's id.
        budget: String,
        /// The dimension that is short.
        dimension: Dimension,
        /// Spent (and reserved) so far.
        spent: u64,
        /// The cap.
        cap: u64,
        /// What the call asked.
        ask: u64,
        /// When enough of the spend stops counting for the call to have
        /// a chance (ms since the epoch).
        resets_at_ms: i64,
    },
    /// The call's worst case alone is above a cap: no wait helps.
    #[error("the call's worst case ({dimension}: {ask}) is above budget {budget}'s cap of {cap}")]
    TooLarge {
        /// The rule's id.
        budget: String,
        /// The dimension.
        dimension: Dimension,
        /// What the call asked.
        ask: u64,
        /// The cap.
        cap: u64,
    },
    /// The shared store could not be asked.
    #[error("budget store: {0}")]
    Store(String),
}

/// One budget's part of a reservation: where it was counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The rule's id.
    pub id: String,
    /// The slice the spend went to.
    pub slice: i64,
    /// When that slice stops counting (ms), for the store's expiry.
    pub expires: i64,
}

/// A reservation made: what it counted where. Settle it with
/// [`BudgetStore::adjust`]; forgotten, its worst case stays spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// Its parts, one per rule.
    pub parts: Vec<Part>,
    /// What it counted in each.
    pub amount: Spend,
}

/// The future of a store's reservation.
pub type ReserveFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(Reservation, Vec<Standing>), BudgetError>> + Send + 'a>>;

/// Where budgets' spend is counted.
pub trait BudgetStore: Send + Sync + fmt::Debug {
    /// Reserves `ask` in every one of `rules` at once, or in none. On
    /// success, what each had spent before it.
    fn reserve<'a>(&'a self, rules: &'a [Rule], ask: Spend, now_ms: i64) -> ReserveFuture<'a>;

    /// Settles `r` to `actual`: the difference from what it reserved goes
    /// back (or, above it, is added). Never waits: a shared store is
    /// written in the background.
    fn adjust(&self, r: &Reservation, actual: Spend);
}

/// Refuses `ask` if it is above a cap of `rule` on its own.
pub(crate) fn too_large(rule: &Rule, ask: Spend) -> Result<(), BudgetError> {
    let ask = ask.amounts();
    for (i, cap) in rule.caps.caps().into_iter().enumerate() {
        if let Some(cap) = cap
            && ask[i] > cap
        {
            return Err(BudgetError::TooLarge {
                budget: rule.id.clone(),
                dimension: Dimension::ALL[i],
                ask: ask[i],
                cap,
            });
        }
    }
    Ok(())
}

/// The first dimension of `rule` without room for `ask` after `spent`,
/// as its index in [`Dimension::ALL`].
pub(crate) fn short(rule: &Rule, spent: Spend, ask: Spend) -> Option<usize> {
    let (spent, ask) = (spent.amounts(), ask.amounts());
    rule.caps
        .caps()
        .into_iter()
        .enumerate()
        .position(|(i, cap)| cap.is_some_and(|c| spent[i].saturating_add(ask[i]) > c))
}

/// The refusal of `ask` by dimension `dim` of `rule`, which counts
/// `spent` in it; `oldest` is the start of the oldest slice holding spend
/// (a calendar's spend leaves at the period's end, a rolling window's
/// slice by slice).
pub(crate) fn exceeded(
    rule: &Rule,
    slices: &Slices,
    dim: usize,
    spent: u64,
    ask: Spend,
    oldest: Option<i64>,
) -> BudgetError {
    BudgetError::Exceeded {
        budget: rule.id.clone(),
        dimension: Dimension::ALL[dim],
        spent,
        cap: rule.caps.caps()[dim].unwrap_or(0),
        ask: ask.amounts()[dim],
        resets_at_ms: slices.leaves_at(oldest.unwrap_or(slices.current)),
    }
}

/// A reservation held for a call, settled once its usage is known.
#[derive(Debug)]
pub struct Hold {
    store: Arc<dyn BudgetStore>,
    reservation: Reservation,
}

impl Hold {
    /// `reservation`, made in `store`.
    pub fn new(store: Arc<dyn BudgetStore>, reservation: Reservation) -> Hold {
        Hold { store, reservation }
    }

    /// What it reserved.
    pub fn reserved(&self) -> Spend {
        self.reservation.amount
    }

    /// Settles to what the call used.
    pub fn settle(self, actual: Spend) {
        if actual != self.reservation.amount {
            self.store.adjust(&self.reservation, actual);
        }
    }

    /// The call cost nothing (refused or failed before any token): the
    /// whole reservation goes back.
    pub fn release(self) {
        self.settle(Spend::default());
    }
}

#[cfg(test)]
mod tests;
