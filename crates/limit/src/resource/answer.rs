//! What an upstream's answer does to a resource under the evidence policy
//! (see [`crate::adaptive`]): collisions pause and widen the margin, 429s
//! that keep coming cut, announced rates set the rate.

use std::time::Duration;

use super::{State, nanos};
use crate::adaptive::{self, Adaptive, CapacityChange, ChangeReason, Cut, estimate};
use crate::headers::RateLimitHeaders;
use crate::limit::{Algorithm, Limit};
use crate::meter::Nanos;
use crate::resource::Shared;

/// The smallest step of a widened margin.
const MIN_MARGIN_STEP: Nanos = 10_000_000;
/// A widened margin narrows by a quarter after this long without a
/// collision.
const MARGIN_DECAY: Nanos = 60_000_000_000;
/// Announced rates are applied in units small enough that rounding loses
/// at most 1 %.
const RATE_UNITS: u64 = 100;

/// One answer, as the limiter reads it for one resource.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Answer<'a> {
    pub(crate) status: u16,
    pub(crate) headers: &'a RateLimitHeaders,
    /// Whether the headers' request quota is this resource's.
    pub(crate) requests: bool,
    /// When the call was let go here, if known.
    pub(crate) sent_at: Option<Nanos>,
}

impl State {
    /// The adaptive state, created at need.
    pub(crate) fn adaptive_mut(&mut self, shared: &Shared) -> &mut Adaptive {
        let limit = self.limit;
        let margin = shared.base_margin();
        self.adaptive
            .get_or_insert_with(|| Box::new(Adaptive::new(limit, margin)))
    }

    /// Applies an answer to a call on this resource.
    pub(crate) fn answered(&mut self, now: Nanos, answer: Answer<'_>, shared: &Shared, name: &str) {
        let refills = matches!(self.limit.kind(), Algorithm::TokenBucket | Algorithm::Gcra);
        if refills && answer.requests {
            self.count_announcement(now, answer, shared, name);
        }
        if answer.status == 429 {
            self.collided(now, answer, refills, shared, name);
        } else if answer.status < 400
            && let Some(a) = self.adaptive.as_mut()
            && answer
                .sent_at
                .zip(a.last_throttle)
                .is_none_or(|(sent, last)| sent >= last)
        {
            a.strikes = 0;
        }
    }

    /// Feeds the rate estimate and follows it once it is ready.
    fn count_announcement(&mut self, now: Nanos, answer: Answer<'_>, shared: &Shared, name: &str) {
        let h = answer.headers;
        let Some(quota) = h.requests.as_ref() else {
            return;
        };
        let bounds = match (h.policy_window, quota.limit) {
            (Some(w), Some(limit)) => estimate::policy_bounds(limit, w),
            _ if h.refills => estimate::bounds(quota, answer.status < 400),
            _ => None,
        };
        let (Some(bounds), Some(burst)) = (bounds, quota.limit) else {
            return;
        };
        let a = self.adaptive_mut(shared);
        a.estimate.add(now, bounds, burst);
        if a.estimate.ready(now) {
            self.follow_estimate(now, shared, name);
        }
    }

    /// Moves the rate to what the upstream announces: down when it says
    /// less than the rate in force, up when it says more (never above the
    /// configured rate, unless that one is only a guess: see
    /// [`Limit::provisional`]). Always to the interval's low end, which
    /// the upstream's rate is not below.
    fn follow_estimate(&mut self, now: Nanos, shared: &Shared, name: &str) {
        let Some(a) = self.adaptive.as_ref() else {
            return;
        };
        let e = a.estimate;
        let current = self.limit.per_second_rate();
        let ceiling = if a.configured.is_provisional() {
            f64::INFINITY
        } else {
            a.configured.per_second_rate()
        };
        let narrow = e.hi - e.lo <= 0.05 * e.hi;
        // A low end far below the high one (a 429 that found the bucket
        // nearly full: the call was refused on another quota) says little
        // of the rate: never cut to it.
        let informative = e.lo >= 0.5 * e.hi;
        let lower = e.hi < current * 0.98 && informative && (narrow || e.hi < current * 0.8);
        let raise = e.lo > current * 1.01 && current < ceiling;
        if lower || raise {
            self.set_rate(now, e.lo.min(ceiling), e.burst, shared, name);
        }
    }

    /// Puts `rate` per second in force, with the upstream's `burst` at
    /// most; the configured limit again once `rate` reaches it.
    fn set_rate(&mut self, now: Nanos, rate: f64, burst: u64, shared: &Shared, name: &str) {
        let Some(a) = self.adaptive.as_mut() else {
            return;
        };
        let configured = a.configured;
        let previous = self.limit;
        // Within a percent of the configured rate is the configured rate:
        // a collision now and then costs less than a percent held back. (A
        // guess is no ceiling: above it the announced rate is followed.)
        let at_configured = if configured.is_provisional() {
            (rate - configured.per_second_rate()).abs() <= configured.per_second_rate() * 0.01
        } else {
            rate >= configured.per_second_rate() * 0.99
        };
        let next = if at_configured {
            a.cut = Cut::None;
            configured
        } else {
            a.cut = Cut::Announced;
            announced_limit(&configured, rate, burst)
        };
        if next == previous {
            return;
        }
        self.limit = next;
        self.meter.reconfigure(&next, now);
        shared.emit(CapacityChange {
            resource: name.to_owned(),
            previous: previous.capacity(),
            capacity: next.capacity(),
            configured: configured.capacity(),
            window: next.window(),
            reason: ChangeReason::Announced,
            at: shared.instant(now),
            announced_by: None,
        });
        self.wake_head();
    }

    /// A 429: pause for what it asks, widen the margin if it was a timing
    /// collision, and cut once 429s keep coming.
    fn collided(
        &mut self,
        now: Nanos,
        answer: Answer<'_>,
        refills: bool,
        shared: &Shared,
        name: &str,
    ) {
        let cfg = shared.adaptive;
        let wait = answer.headers.throttle_wait();
        let kind_cut = {
            let a = self.adaptive_mut(shared);
            if let Some(w) = wait {
                let until = now.saturating_add(nanos(w.min(cfg.max_pause)));
                a.paused_until = a.paused_until.max(until);
            }
            // A call let go before the last 429 was seen was already on its
            // way: it proves nothing the last one did not.
            let counts = match (answer.sent_at, a.last_throttle) {
                (Some(sent), Some(last)) => sent >= last,
                (None, Some(last)) => now >= last.saturating_add(nanos(cfg.strike_spacing())),
                (_, None) => true,
            };
            if counts {
                a.strikes += 1;
            }
            a.last_throttle = Some(now);
            if a.cut == Cut::Evidence {
                // Recovery waits for clean answers.
                a.next_recovery = now.saturating_add(nanos(cfg.fast_recovery_interval));
            }
            let collision = wait.is_none_or(|w| w <= cfg.collision_wait);
            if collision && refills {
                a.margin = a
                    .margin
                    .saturating_mul(2)
                    .max(MIN_MARGIN_STEP)
                    .min(nanos(cfg.max_jitter_margin).max(a.margin));
                a.margin_at = now;
            }
            let proven = a.strikes >= cfg.strikes && !a.estimate.ready(now);
            (a.margin, proven)
        };
        self.meter.set_margin(kind_cut.0);
        if kind_cut.1 {
            self.cut_on_evidence(now, shared, name);
        }
    }

    /// 429s kept coming in step with the upstream: its limit is lower than
    /// the one in force. Cut by the reduce factor (once per cooldown) and
    /// recover quickly once answers are clean.
    fn cut_on_evidence(&mut self, now: Nanos, shared: &Shared, name: &str) {
        let cfg = shared.adaptive;
        let limit = self.limit;
        let Some(a) = self.adaptive.as_mut() else {
            return;
        };
        a.strikes = 0;
        let cooldown = nanos(cfg.cooldown.unwrap_or(limit.window()));
        if a.reduced_at
            .is_some_and(|t| now < t.saturating_add(cooldown))
        {
            return;
        }
        let previous = limit.capacity();
        let capacity = adaptive::reduced(previous, cfg.reduce_factor);
        if capacity == previous {
            return;
        }
        a.reduced_at = Some(now);
        a.cut = Cut::Evidence;
        a.next_recovery = now.saturating_add(nanos(cfg.fast_recovery_interval));
        self.limit = limit.scaled_to(capacity, limit.window());
        self.meter.reconfigure(&self.limit, now);
        let configured = a.configured.capacity();
        shared.emit(CapacityChange {
            resource: name.to_owned(),
            previous,
            capacity,
            configured,
            window: self.limit.window(),
            reason: ChangeReason::Throttled,
            at: shared.instant(now),
            announced_by: None,
        });
    }

    /// A widened margin narrows again after a minute without collisions.
    pub(crate) fn decay_margin(&mut self, now: Nanos, base: Nanos) {
        let Some(a) = self.adaptive.as_mut() else {
            return;
        };
        if a.margin > base && now >= a.margin_at.saturating_add(MARGIN_DECAY) {
            a.margin = (a.margin / 4 * 3).max(base);
            a.margin_at = now;
            let margin = a.margin;
            self.meter.set_margin(margin);
        }
    }

    /// Why the resource differs from its configured self, in words.
    pub(crate) fn reason(&self, now: Nanos) -> Option<String> {
        let a = self.adaptive.as_ref()?;
        let mut parts = Vec::new();
        if a.paused_until > now {
            parts.push(format!(
                "paused {} ms for the upstream's Retry-After",
                (a.paused_until - now).div_ceil(1_000_000)
            ));
        }
        match a.cut {
            Cut::None => {}
            Cut::Seed => parts.push("cut after a 429, recovering ×1.1 every 30 s".to_owned()),
            Cut::Evidence => {
                parts.push("cut after 429s kept coming, recovering each clean second".to_owned())
            }
            Cut::Announced => parts.push(format!(
                "the upstream's headers announce {:.2}/s",
                a.estimate.lo
            )),
        }
        if a.strikes > 0 {
            parts.push(format!("{} 429s in a row", a.strikes));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// `rate` per second as a limit of `configured`'s algorithm: a window long
/// enough to hold at least [`RATE_UNITS`] calls, so that rounding the
/// capacity down loses at most 1 %, and the burst of `configured` or the
/// upstream's, whichever is smaller.
fn announced_limit(configured: &Limit, rate: f64, burst: u64) -> Limit {
    let window = configured.window().as_secs_f64().max(1e-3);
    let per_window = rate * window;
    let k = (RATE_UNITS as f64 / per_window.max(1e-9))
        .ceil()
        .clamp(1.0, 1_000.0);
    let window = Duration::from_secs_f64(window * k);
    // Bounded however much is announced (a guess is no ceiling).
    let capacity = ((rate * window.as_secs_f64()).floor() as u64).clamp(1, crate::MAX_CAPACITY);
    // A guessed burst says nothing: the upstream's is the one to use.
    let burst = if configured.is_provisional() {
        burst.max(1)
    } else {
        configured.effective_burst().min(burst.max(1))
    };
    Limit::new(capacity, window)
        .algorithm(configured.kind())
        .burst(burst.min(crate::MAX_CAPACITY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_rates_round_within_a_percent() {
        let l = announced_limit(&Limit::per_second(50).burst(10), 29.7, 10);
        let rate = l.per_second_rate();
        assert!((29.7 * 0.99..=29.7).contains(&rate), "{l:?}");
        assert_eq!(l.effective_burst(), 10);
        let l = announced_limit(&Limit::per_second(1_000_000), 20.3, 20);
        assert!(l.per_second_rate() <= 20.3 && l.per_second_rate() > 20.0);
        assert_eq!(l.effective_burst(), 20);
    }
}
