//! A limiter backend of your own (docs/architecture.md, "A new limiter
//! backend"): a fixed-window counter behind a mutex, implementing
//! [`RateLimiter`] so that the gateway, a job kind or a test can hold it as
//! an `Arc<dyn RateLimiter>` and never know which backend it has.
//!
//! What a backend must do, method by method:
//! - `acquire_many`: every resource's cost, or none, waiting (cancel-safe:
//!   dropping the future takes nothing) until `deadline`;
//! - `try_acquire_many`: the same without waiting, `RateLimited` with how
//!   long to wait;
//! - `get_capacity` / `capacities`: what it holds, for `/v1/limits`;
//! - `observe` / `report_throttled`: what an upstream said (a 429 pauses);
//! - `set_limit`, `contains`, `remove_idle`: the registry of resources.
//!
//! Its grants hold nothing (a window's count is not given back), so its
//! [`Permit`] wraps a [`HeldGrant`] whose drop does nothing; a backend
//! with in-flight limits releases them in that drop.
//!
//! `cargo run -p sluice-limit --example fixed_window`; its test is
//! `crates/limit/tests/backend_recipe.rs`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use sluice_limit::headers::RateLimitHeaders;
use sluice_limit::{
    Algorithm, Capacity, Error, HeldGrant, Limit, LimitFuture, Permit, RateLimiter,
};
use tokio::time::Instant;

/// At most `limit.capacity()` per window, the window restarting when the
/// first take after it ended comes.
#[derive(Debug, Default)]
pub struct FixedWindow {
    windows: Mutex<HashMap<String, Window>>,
}

#[derive(Debug)]
struct Window {
    limit: Limit,
    started: Instant,
    taken: u64,
    paused_until: Option<Instant>,
}

impl Window {
    /// Rolls the window forward to `now`; how long until `cost` fits.
    fn wait_for(&mut self, cost: u64, now: Instant) -> Option<Duration> {
        if now >= self.started + self.limit.window() {
            self.started = now;
            self.taken = 0;
        }
        if let Some(until) = self.paused_until.filter(|u| *u > now) {
            return Some(until - now);
        }
        (self.taken + cost > self.limit.capacity())
            .then(|| self.started + self.limit.window() - now)
    }
}

/// Its grants hold nothing to give back.
#[derive(Debug)]
struct Counted;

impl HeldGrant for Counted {
    fn settle(&mut self, _actual: u64) {}

    fn settle_part(&mut self, _resource: &str, _actual: u64) -> Result<(), Error> {
        Ok(())
    }
}

impl FixedWindow {
    /// Takes every cost now, or none: the longest wait and its resource.
    fn take(&self, needs: &[(&str, u64)]) -> Result<Permit, (String, Duration)> {
        let mut windows = self.windows.lock().expect("not poisoned");
        let now = Instant::now();
        let mut longest: Option<(String, Duration)> = None;
        for (resource, cost) in needs {
            let Some(w) = windows.get_mut(*resource) else {
                continue;
            };
            if let Some(wait) = w.wait_for(*cost, now)
                && longest.as_ref().is_none_or(|(_, l)| wait > *l)
            {
                longest = Some(((*resource).to_owned(), wait));
            }
        }
        if let Some(longest) = longest {
            return Err(longest);
        }
        for (resource, cost) in needs {
            if let Some(w) = windows.get_mut(*resource) {
                w.taken += cost;
            }
        }
        Ok(Permit::new(Counted))
    }

    /// Every resource is known and every cost could ever fit.
    fn check(&self, needs: &[(&str, u64)]) -> Result<(), Error> {
        let windows = self.windows.lock().expect("not poisoned");
        for (resource, cost) in needs {
            let w = windows
                .get(*resource)
                .ok_or_else(|| Error::UnknownResource((*resource).to_owned()))?;
            if *cost > w.limit.capacity() {
                return Err(Error::InsufficientCapacity {
                    resource: (*resource).to_owned(),
                    cost: *cost,
                    capacity: w.limit.capacity(),
                });
            }
        }
        Ok(())
    }

    fn capacity_of(resource: &str, w: &Window, now: Instant) -> Capacity {
        let over = now >= w.started + w.limit.window();
        let taken = if over { 0 } else { w.taken };
        Capacity {
            resource: resource.to_owned(),
            algorithm: Algorithm::SlidingWindow,
            available: (w.limit.capacity() - taken.min(w.limit.capacity())) as f64,
            total: w.limit.capacity(),
            burst: w.limit.capacity(),
            window: w.limit.window(),
            in_flight: 0,
            waiting: 0,
            configured: w.limit.capacity(),
            paused_for: w.paused_until.filter(|u| *u > now).map(|u| u - now),
            configured_window: w.limit.window(),
            jitter_margin: Duration::ZERO,
            reason: w
                .paused_until
                .filter(|u| *u > now)
                .map(|_| "paused after an upstream 429".to_owned()),
            announced_per_second: None,
            announced_in_force: false,
        }
    }
}

impl RateLimiter for FixedWindow {
    fn acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
        deadline: Option<Instant>,
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        LimitFuture::boxed(async move {
            self.check(needs)?;
            loop {
                // Nothing is held across the sleep: dropping this future
                // takes nothing (cancel-safe).
                let (resource, wait) = match self.take(needs) {
                    Ok(permit) => return Ok(permit),
                    Err(waiting) => waiting,
                };
                let wake = Instant::now() + wait;
                if deadline.is_some_and(|d| wake > d) {
                    return Err(Error::DeadlinePassed {
                        resource,
                        wait: Some(wait),
                    });
                }
                tokio::time::sleep_until(wake).await;
            }
        })
    }

    fn try_acquire_many<'a>(
        &'a self,
        needs: &'a [(&'a str, u64)],
    ) -> LimitFuture<'a, Result<Permit, Error>> {
        LimitFuture::ready(self.check(needs).and_then(|()| {
            self.take(needs)
                .map_err(|(resource, wait)| Error::RateLimited {
                    resource,
                    retry_after: Some(wait),
                })
        }))
    }

    fn get_capacity<'a>(&'a self, resource: &'a str) -> LimitFuture<'a, Result<Capacity, Error>> {
        let windows = self.windows.lock().expect("not poisoned");
        LimitFuture::ready(
            windows
                .get(resource)
                .map(|w| Self::capacity_of(resource, w, Instant::now()))
                .ok_or_else(|| Error::UnknownResource(resource.to_owned())),
        )
    }

    fn capacities<'a>(
        &'a self,
        wanted: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> LimitFuture<'a, Vec<Capacity>> {
        let windows = self.windows.lock().expect("not poisoned");
        let now = Instant::now();
        LimitFuture::ready(
            windows
                .iter()
                .filter(|(r, _)| wanted(r))
                .map(|(r, w)| Self::capacity_of(r, w, now))
                .collect(),
        )
    }

    fn observe<'a>(
        &'a self,
        _grant: Option<&'a Permit>,
        requests: Option<&'a str>,
        _tokens: Option<&'a str>,
        status: u16,
        headers: &'a RateLimitHeaders,
    ) -> LimitFuture<'a, Result<(), Error>> {
        // This backend only learns from a 429: it pauses the resource for
        // the Retry-After the upstream sent.
        match (requests, status) {
            (Some(resource), 429) => self.report_throttled(resource, headers.retry_after),
            _ => LimitFuture::ready(Ok(())),
        }
    }

    fn report_throttled<'a>(
        &'a self,
        resource: &'a str,
        retry_after: Option<Duration>,
    ) -> LimitFuture<'a, Result<(), Error>> {
        let mut windows = self.windows.lock().expect("not poisoned");
        LimitFuture::ready(match windows.get_mut(resource) {
            Some(w) => {
                let pause = retry_after.unwrap_or(w.limit.window());
                w.paused_until = Some(Instant::now() + pause);
                Ok(())
            }
            None => Err(Error::UnknownResource(resource.to_owned())),
        })
    }

    fn set_limit(&self, resource: &str, limit: Limit) -> Result<(), Error> {
        limit.validate()?;
        let mut windows = self.windows.lock().expect("not poisoned");
        let now = Instant::now();
        windows
            .entry(resource.to_owned())
            .and_modify(|w| w.limit = limit)
            .or_insert(Window {
                limit,
                started: now,
                taken: 0,
                paused_until: None,
            });
        Ok(())
    }

    fn contains(&self, resource: &str) -> bool {
        self.windows
            .lock()
            .expect("not poisoned")
            .contains_key(resource)
    }

    fn remove_idle(&self, resource: &str) -> bool {
        self.windows
            .lock()
            .expect("not poisoned")
            .remove(resource)
            .is_some()
    }
}

#[allow(dead_code)] // the test includes this file for `FixedWindow` alone
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let limiter: std::sync::Arc<dyn RateLimiter> = std::sync::Arc::new(FixedWindow::default());
    limiter.set_limit("api:slack", Limit::new(2, Duration::from_millis(200)))?;
    let started = Instant::now();
    for i in 0..5 {
        let _permit = limiter.acquire_many(&[("api:slack", 1)], None).await?;
        println!("call {i} at {:?}", started.elapsed());
    }
    let refused = limiter.try_acquire_many(&[("api:slack", 1)]).await;
    println!("then try_acquire: {refused:?}");
    Ok(())
}
