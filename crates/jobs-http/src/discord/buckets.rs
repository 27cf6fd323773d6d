//! Discord's per-route rate limits, learned from its answers.
//!
//! Discord groups routes into buckets it names in `X-RateLimit-Bucket`;
//! a bucket's count is per major parameter (guild or channel). Calls on
//! one bucket go one at a time (as discord.js does): then the
//! `X-RateLimit-Remaining` of the last answer is exact, and a call on an
//! exhausted bucket waits for `X-RateLimit-Reset-After` instead of
//! drawing a 429.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::sync::Mutex as AsyncMutex;
use tokio::time::Instant;

/// What is known of one bucket.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    /// Calls left in the current window, per the last answer.
    pub remaining: Option<u64>,
    /// When the window resets.
    pub reset_at: Option<Instant>,
}

impl Bucket {
    /// How long to wait before the next call, if the bucket is exhausted.
    pub fn wait(&self, now: Instant) -> Option<Duration> {
        match (self.remaining, self.reset_at) {
            (Some(0), Some(reset)) if reset > now => Some(reset - now),
            _ => None,
        }
    }

    /// Takes in an answer's headers.
    pub fn learn(&mut self, h: &Learned, now: Instant) {
        if let Some(r) = h.remaining {
            self.remaining = Some(r);
        }
        if let Some(after) = h.reset_after {
            self.reset_at = Some(now + after);
        }
    }
}

/// The rate-limit headers of one answer.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Learned {
    pub bucket: Option<String>,
    pub remaining: Option<u64>,
    pub reset_after: Option<Duration>,
}

impl Learned {
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let get = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
        Self {
            bucket: get("x-ratelimit-bucket")
                .filter(|b| b.len() <= 64)
                .map(str::to_owned),
            remaining: get("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok()),
            reset_after: get("x-ratelimit-reset-after")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0 && *s < 86_400.0)
                .map(Duration::from_secs_f64),
        }
    }
}

/// A lane: one bucket's state behind the lock that serializes its calls.
pub(crate) type Lane = Arc<AsyncMutex<Bucket>>;

/// Route → bucket, and bucket → state, both bounded.
#[derive(Debug)]
pub(crate) struct Buckets {
    max: usize,
    inner: Mutex<Maps>,
}

#[derive(Debug, Default)]
struct Maps {
    /// Route (with its major id) → lane key (`{bucket}:{major}`), once known.
    routes: HashMap<String, String>,
    /// Lane key (or the route itself before its bucket is known) → lane.
    lanes: HashMap<String, Lane>,
}

impl Buckets {
    /// At most `max` routes and `max` lanes are kept.
    pub fn new(max: usize) -> Self {
        Self {
            max: max.max(16),
            inner: Mutex::new(Maps::default()),
        }
    }

    /// The lane of `route`.
    pub fn lane(&self, route: &str) -> Lane {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let key = m
            .routes
            .get(route)
            .cloned()
            .unwrap_or_else(|| route.to_owned());
        if let Some(lane) = m.lanes.get(&key) {
            return Arc::clone(lane);
        }
        if m.lanes.len() >= self.max {
            m.evict(self.max);
        }
        let lane = Lane::default();
        m.lanes.insert(key, Arc::clone(&lane));
        lane
    }

    /// Records that `route` (whose major parameter is `major`) is in
    /// `bucket`, and gives that bucket what `state` knows, unless the
    /// bucket is busy (its holder will learn for itself).
    pub fn learn_bucket(&self, route: &str, major: &str, bucket: &str, state: &Bucket) {
        let key = format!("{bucket}:{major}");
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if m.routes.get(route) == Some(&key) {
            return;
        }
        if m.routes.len() >= self.max {
            m.routes.clear();
        }
        m.routes.insert(route.to_owned(), key.clone());
        if m.lanes.len() >= self.max {
            m.evict(self.max);
        }
        let lane = m.lanes.entry(key).or_default();
        if let Ok(mut b) = lane.try_lock() {
            b.remaining = state.remaining;
            b.reset_at = state.reset_at;
        }
    }

    /// How many lanes are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().lanes.len()
    }
}

impl Maps {
    /// Drops lanes nobody holds whose window is over; if that frees too
    /// little, every lane nobody holds (forgetting a bucket only costs a
    /// call that learns it again, or at worst one 429).
    fn evict(&mut self, max: usize) {
        let now = Instant::now();
        self.lanes.retain(|_, lane| {
            Arc::strong_count(lane) > 1
                || lane
                    .try_lock()
                    .map_or(true, |b| b.reset_at.is_some_and(|r| r > now))
        });
        if self.lanes.len() >= max {
            self.lanes.retain(|_, lane| Arc::strong_count(lane) > 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_exhausted_bucket_waits_for_its_reset_and_maps_stay_bounded() {
        let now = Instant::now();
        let mut b = Bucket::default();
        assert_eq!(b.wait(now), None);
        b.learn(
            &Learned {
                bucket: None,
                remaining: Some(0),
                reset_after: Some(Duration::from_millis(1500)),
            },
            now,
        );
        assert_eq!(b.wait(now), Some(Duration::from_millis(1500)));
        assert_eq!(b.wait(now + Duration::from_secs(2)), None);

        let buckets = Buckets::new(16);
        for i in 0..100 {
            let _ = buckets.lane(&format!("POST /guilds/{i}/roles"));
        }
        assert!(buckets.len() <= 16);
        let held = buckets.lane("POST /guilds/1/roles");
        buckets.learn_bucket("POST /guilds/1/roles", "1", "abc", &b);
        let shared = buckets.lane("POST /guilds/1/roles");
        assert!(
            !Arc::ptr_eq(&held, &shared),
            "the route moved to its bucket's lane"
        );
        assert_eq!(shared.lock().await.remaining, Some(0));
    }
}
