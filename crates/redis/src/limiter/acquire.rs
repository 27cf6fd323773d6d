//! Taking from resources: at once, or waiting in a per-replica FIFO line.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use sluice_limit::Error;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::line::{Stash, Stashed};
use super::{Inner, MAP_BOUND, RedisLimiter, Refusal, lock};
use crate::grant::RedisGrant;

impl RedisLimiter {
    /// Takes `cost` from `resource` now, or says how long to wait.
    ///
    /// # Errors
    /// As [`RedisLimiter::try_acquire_many`].
    pub async fn try_acquire(&self, resource: &str, cost: u64) -> Result<RedisGrant, Error> {
        self.try_acquire_many(&[(resource, cost)]).await
    }

    /// Takes from several resources at once, all or nothing, without
    /// waiting.
    ///
    /// # Errors
    /// [`Error::RateLimited`] with the wait (none for in-flight limits);
    /// [`Error::InsufficientCapacity`]; [`Error::UnknownResource`];
    /// [`Error::Closed`]. While Redis is away: the local share's answers
    /// (fail open) or [`Error::RateLimited`] (fail closed).
    pub async fn try_acquire_many(&self, needs: &[(&str, u64)]) -> Result<RedisGrant, Error> {
        let specs = self.inner.needs(needs)?;
        match self.inner.attempt(&specs).await {
            Ok(g) => Ok(g),
            Err(Refusal::Down) => self.inner.fallback(needs, None).await,
            Err(r) => Err(r.into_error()),
        }
    }

    /// Waits until `cost` can be taken from `resource` (FIFO per replica),
    /// or until `deadline`.
    ///
    /// # Errors
    /// As [`RedisLimiter::acquire_many`].
    pub async fn acquire(
        &self,
        resource: &str,
        cost: u64,
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        self.acquire_many(&[(resource, cost)], deadline).await
    }

    /// Waits until every `(resource, cost)` can be taken at once, in FIFO
    /// order among this replica's waiters on the first resource, or until
    /// `deadline`. A wait known to end past the deadline fails at once.
    ///
    /// # Errors
    /// [`Error::DeadlinePassed`] with the wait it would have needed;
    /// [`Error::InsufficientCapacity`]; [`Error::UnknownResource`];
    /// [`Error::Closed`]; fail closed while Redis is away:
    /// [`Error::RateLimited`].
    pub async fn acquire_many(
        &self,
        needs: &[(&str, u64)],
        deadline: Option<Instant>,
    ) -> Result<RedisGrant, Error> {
        let inner = &self.inner;
        let specs = inner.needs(needs)?;
        let Some(first) = specs.first() else {
            return Err(Error::UnknownResource(String::new()));
        };
        let q = inner.waitq(&first.0.name);
        if q.waiting.load(Ordering::SeqCst) == 0 {
            if let Stashed::Grant(g) = inner.from_stash(&specs, &q, 0) {
                return Ok(g);
            }
            match inner.attempt(&specs).await {
                Ok(g) => return Ok(g),
                Err(Refusal::Down) => return inner.fallback(needs, deadline).await,
                Err(Refusal::Fatal(e)) => return Err(e),
                Err(Refusal::Wait { .. }) => {}
            }
        }
        q.waiting.fetch_add(1, Ordering::SeqCst);
        let _line = Leave(inner, &q);
        let _turn = match deadline {
            Some(d) => tokio::time::timeout_at(d, q.turn.lock())
                .await
                .map_err(|_| Error::DeadlinePassed {
                    resource: first.0.name.clone(),
                    wait: None,
                })?,
            None => q.turn.lock().await,
        };
        loop {
            let notified = q.notify.notified();
            let queued = q.waiting.load(Ordering::SeqCst) as u64;
            let (resource, wait, known) = match inner.from_stash(&specs, &q, queued) {
                Stashed::Grant(g) => return Ok(g),
                // Reserved for this waiter: due then.
                Stashed::Due(at) => (
                    first.0.name.clone(),
                    at.saturating_duration_since(Instant::now()),
                    true,
                ),
                // A reservation on its way wakes the head when it lands
                // (or fails); the timeout bounds the call.
                Stashed::Coming => (first.0.name.clone(), inner.cfg.timeout, false),
                Stashed::Empty => match inner.attempt_for_line(&specs, &q, queued).await {
                    Ok(Some(g)) => return Ok(g),
                    Ok(None) => continue,
                    Err(Refusal::Down) => return inner.fallback(needs, deadline).await,
                    Err(Refusal::Fatal(e)) => return Err(e),
                    Err(Refusal::Wait {
                        resource,
                        wait,
                        known,
                    }) => (resource, wait, known),
                },
            };
            if inner.closed.load(Ordering::SeqCst) {
                return Err(Error::Closed);
            }
            if resource != first.0.name {
                inner.watch(&resource, &q);
            }
            let now = Instant::now();
            let mut until = now + wait;
            if let Some(d) = deadline {
                if known && until > d {
                    return Err(Error::DeadlinePassed {
                        resource,
                        wait: Some(wait),
                    });
                }
                if now >= d {
                    return Err(Error::DeadlinePassed {
                        resource,
                        wait: None,
                    });
                }
                until = until.min(d);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = notified => {}
            }
        }
    }
}

/// A replica's FIFO line for one resource: the head sleeps until the wait
/// Redis reported, or until a release notice wakes it; the others wait
/// their turn behind it, so nobody polls Redis.
#[derive(Debug, Default)]
pub(crate) struct Waitq {
    pub(super) waiting: AtomicUsize,
    /// Tokens reserved for the line's waiters (`line.rs`).
    pub(super) stash: std::sync::Mutex<Stash>,
    turn: tokio::sync::Mutex<()>,
    pub(crate) notify: Notify,
}

struct Leave<'a>(&'a Arc<Inner>, &'a Waitq);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        if self.1.waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
            // The last waiter left: what the line reserved and nobody
            // spent goes back.
            self.0.drop_line(self.1);
        }
        // Whoever is next may go now rather than at its old wake-up.
        self.1.notify.notify_one();
    }
}

impl Inner {
    fn waitq(&self, resource: &str) -> Arc<Waitq> {
        let mut qs = lock(&self.queues);
        if qs.len() >= MAP_BOUND {
            qs.retain(|_, q| Arc::strong_count(q) > 1);
        }
        qs.entry(resource.to_owned()).or_default().clone()
    }

    /// Wakes this replica's head waiter on `resource`: something came back.
    pub(crate) fn wake(&self, resource: &str) {
        lock(&self.deny).remove(resource);
        if let Some(q) = lock(&self.queues).get(resource) {
            q.notify.notify_one();
        }
        if let Some(qs) = lock(&self.interest).remove(resource) {
            for q in qs {
                q.notify.notify_one();
            }
        }
    }

    /// Wakes `q`'s head at `resource`'s next release notice as well.
    fn watch(&self, resource: &str, q: &Arc<Waitq>) {
        let mut m = lock(&self.interest);
        if m.len() >= MAP_BOUND {
            // Stale entries only cost a spurious wake-up; drop them all.
            m.clear();
        }
        let qs = m.entry(resource.to_owned()).or_default();
        if !qs.iter().any(|x| Arc::ptr_eq(x, q)) {
            qs.push(q.clone());
        }
    }
}
