//! [`RedisBudgets`]: the count in Redis, shared by every replica (feature
//! `redis`).
//!
//! Each budget is one hash, `{prefix}budget:{id}`, with a field per slice
//! and dimension (`{slice start}:m`, `:t`, `:r`); slices out of the window
//! are deleted by the next reservation, and the hash expires when its
//! newest slice stops counting. A reservation is one script over all of a
//! call's budgets (`reserve.lua`: all or none), a settle another
//! (`adjust.lua`), sent in the background. Slices are computed from this
//! process's clock: replicas whose clocks differ by a few milliseconds
//! may count a call at a period's edge in either period.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::Script;
use sluice_limit::{Clock, TokioClock};

use super::{
    BudgetError, BudgetStore, Part, Reservation, ReserveFuture, Rule, Spend, Standing, exceeded,
    too_large,
};
use crate::redis_link::RedisLink;

/// Budgets counted in Redis.
#[derive(Debug, Clone)]
pub struct RedisBudgets {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    link: RedisLink,
    prefix: String,
    reserve: Script,
    adjust: Script,
    /// Settles that did not reach Redis.
    lost: AtomicU64,
}

impl RedisBudgets {
    /// Budgets in Redis at `url` under `prefix` (`sluice:`), calls of at
    /// most `timeout`. It connects on first use.
    ///
    /// # Errors
    /// Redis's error when `url` cannot be parsed.
    pub fn new(url: &str, prefix: &str, timeout: Duration) -> redis::RedisResult<RedisBudgets> {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock);
        Ok(RedisBudgets {
            inner: Arc::new(Inner {
                link: RedisLink::new(url, timeout, clock)?,
                prefix: prefix.to_owned(),
                reserve: Script::new(include_str!("redis/reserve.lua")),
                adjust: Script::new(include_str!("redis/adjust.lua")),
                lost: AtomicU64::new(0),
            }),
        })
    }

    /// How many settles did not reach Redis (each left its call's worst
    /// case counted: over, never under).
    pub fn lost_settles(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    fn key(&self, id: &str) -> String {
        format!("{}budget:{id}", self.inner.prefix)
    }

    async fn reserve_in_redis(
        &self,
        rules: &[Rule],
        ask: Spend,
        now_ms: i64,
    ) -> Result<(Reservation, Vec<Standing>), BudgetError> {
        for rule in rules {
            too_large(rule, ask)?;
        }
        let slices: Vec<_> = rules.iter().map(|r| r.window.slices(now_ms)).collect();
        let mut inv = self.inner.reserve.prepare_invoke();
        for a in ask.amounts() {
            inv.arg(a);
        }
        for (rule, s) in rules.iter().zip(&slices) {
            inv.key(self.key(&rule.id));
            inv.arg(s.oldest).arg(s.current);
            for cap in rule.caps.caps() {
                inv.arg(cap.map_or(-1, |c| i64::try_from(c).unwrap_or(i64::MAX)));
            }
            // A TTL, not a time: Redis's clock need not agree with ours.
            inv.arg((s.expires - now_ms).max(1));
        }
        let out: Vec<i64> = self
            .inner
            .link
            .call(|mut c| async move { inv.invoke_async(&mut c).await })
            .await
            .ok_or_else(|| BudgetError::Store("redis did not answer".into()))?;
        let amount = |v: i64| u64::try_from(v).unwrap_or(0);
        match out.as_slice() {
            [1, spent @ ..] if spent.len() == 3 * rules.len() => {
                let standing = rules
                    .iter()
                    .zip(&slices)
                    .zip(spent.chunks(3))
                    .map(|((rule, s), c)| Standing {
                        id: rule.id.clone(),
                        spent: Spend::from_amounts([amount(c[0]), amount(c[1]), amount(c[2])]),
                        caps: rule.caps,
                        resets_at_ms: s.expires,
                    })
                    .collect();
                let parts = rules
                    .iter()
                    .zip(&slices)
                    .map(|(rule, s)| Part {
                        id: rule.id.clone(),
                        slice: s.current,
                        expires: s.expires,
                    })
                    .collect();
                Ok((Reservation { parts, amount: ask }, standing))
            }
            &[0, i, dim, spent, first] => {
                let i = usize::try_from(i - 1).unwrap_or(0).min(rules.len() - 1);
                let dim = usize::try_from(dim - 1).unwrap_or(0).min(2);
                let oldest = (first >= 0).then_some(first);
                Err(exceeded(
                    &rules[i],
                    &slices[i],
                    dim,
                    amount(spent),
                    ask,
                    oldest,
                ))
            }
            other => Err(BudgetError::Store(format!(
                "unexpected answer from the reserve script: {other:?}"
            ))),
        }
    }
}

impl BudgetStore for RedisBudgets {
    fn reserve<'a>(&'a self, rules: &'a [Rule], ask: Spend, now_ms: i64) -> ReserveFuture<'a> {
        if rules.is_empty() {
            let none = Reservation {
                parts: Vec::new(),
                amount: ask,
            };
            return Box::pin(std::future::ready(Ok((none, Vec::new()))));
        }
        Box::pin(self.reserve_in_redis(rules, ask, now_ms))
    }

    fn adjust(&self, r: &Reservation, actual: Spend) {
        if r.parts.is_empty() {
            return;
        }
        let deltas: Vec<i64> = actual
            .amounts()
            .into_iter()
            .zip(r.amount.amounts())
            .map(|(a, reserved)| i64::try_from(i128::from(a) - i128::from(reserved)).unwrap_or(0))
            .collect();
        let parts: Vec<(String, i64)> =
            r.parts.iter().map(|p| (self.key(&p.id), p.slice)).collect();
        let inner = Arc::clone(&self.inner);
        // Never waits: the answer is already on its way to the client.
        // Redis away, the settle is lost and the worst case stays counted.
        tokio::spawn(async move {
            let mut inv = inner.adjust.prepare_invoke();
            for d in deltas {
                inv.arg(d);
            }
            for (key, slice) in parts {
                inv.key(key).arg(slice);
            }
            let done: Option<i64> = inner
                .link
                .call(|mut c| async move { inv.invoke_async(&mut c).await })
                .await;
            if done.is_none() {
                inner.lost.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}
