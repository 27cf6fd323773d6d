//! Discord's rate limits as the sim enforces them: a global token bucket
//! per bot and a fixed window per route bucket and major parameter.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// Route buckets (per major id) tracked at most; beyond, expired windows
/// are dropped, then the oldest, so that a client inventing ids cannot
/// grow memory.
const MAX_WINDOWS: usize = 16_384;

/// The simulated Discord's limits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordLimits {
    /// Requests per second across every route (Discord's 50).
    pub global_per_second: u32,
    /// Requests a route bucket allows per window, per guild or channel.
    pub route_limit: u32,
    /// The route bucket's window, in milliseconds.
    pub route_window_ms: u64,
}

impl Default for DiscordLimits {
    fn default() -> Self {
        Self {
            global_per_second: 50,
            route_limit: 5,
            route_window_ms: 2_000,
        }
    }
}

/// One route bucket's current window.
#[derive(Debug, Clone, Copy)]
struct Window {
    used: u32,
    ends: Instant,
}

/// What a route bucket says about one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RouteView {
    pub limit: u32,
    pub remaining: u32,
    pub reset_after: Duration,
}

/// The limits' state.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub limits: DiscordLimits,
    global_tokens: f64,
    global_at: Instant,
    windows: HashMap<String, Window>,
}

impl Limiter {
    pub fn new(limits: DiscordLimits, now: Instant) -> Self {
        Self {
            limits,
            global_tokens: f64::from(limits.global_per_second),
            global_at: now,
            windows: HashMap::new(),
        }
    }

    /// Takes a global token, or says how long until one is there.
    pub fn global(&mut self, now: Instant) -> Result<(), Duration> {
        let rate = f64::from(self.limits.global_per_second.max(1));
        let elapsed = now.saturating_duration_since(self.global_at).as_secs_f64();
        self.global_tokens = (self.global_tokens + elapsed * rate).min(rate);
        self.global_at = now;
        if self.global_tokens >= 1.0 {
            self.global_tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.global_tokens) / rate))
        }
    }

    /// Counts a request on `key`'s window: `Ok` with the view after it, or
    /// `Err` with the view of the exhausted window.
    pub fn route(&mut self, key: &str, now: Instant) -> Result<RouteView, RouteView> {
        let limit = self.limits.route_limit.max(1);
        let window = Duration::from_millis(self.limits.route_window_ms.max(1));
        if !self.windows.contains_key(key) && self.windows.len() >= MAX_WINDOWS {
            self.windows.retain(|_, w| w.ends > now);
            if self.windows.len() >= MAX_WINDOWS {
                self.windows.clear();
            }
        }
        let w = self.windows.entry(key.to_owned()).or_insert(Window {
            used: 0,
            ends: now + window,
        });
        if w.ends <= now {
            *w = Window {
                used: 0,
                ends: now + window,
            };
        }
        let view = |used: u32| RouteView {
            limit,
            remaining: limit.saturating_sub(used),
            reset_after: w.ends - now,
        };
        if w.used >= limit {
            return Err(view(w.used));
        }
        w.used += 1;
        Ok(view(w.used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_and_the_global_bucket_refuse_past_their_limits() {
        let t0 = Instant::now();
        let mut l = Limiter::new(DiscordLimits::default(), t0);
        for i in 0..5 {
            assert_eq!(l.route("a", t0).unwrap().remaining, 4 - i);
        }
        let refused = l.route("a", t0).unwrap_err();
        assert_eq!(
            (refused.remaining, refused.reset_after),
            (0, Duration::from_secs(2))
        );
        assert!(
            l.route("b", t0).is_ok(),
            "another major id has its own window"
        );
        assert!(l.route("a", t0 + Duration::from_secs(2)).is_ok());
        let mut l = Limiter::new(DiscordLimits::default(), t0);
        for _ in 0..50 {
            l.global(t0).unwrap();
        }
        assert!(l.global(t0).is_err());
        assert!(l.global(t0 + Duration::from_millis(20)).is_ok());
    }
}
