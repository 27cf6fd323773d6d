//! The dispatch rate observed lately, and the retry-after hint drawn from it.

use std::time::Duration;

use tokio::time::Instant;

/// Seconds of history, one bucket per second.
const WINDOW_SECS: usize = 10;

/// The shortest hint given: `Retry-After` counts whole seconds anyway, and a
/// caller told to come back at once only adds load.
pub(crate) const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest hint given, also used when nothing was dispatched in the
/// whole window (every slot is held by long calls).
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Dispatches counted per second over the last [`WINDOW_SECS`] seconds.
#[derive(Debug)]
pub(crate) struct DispatchRate {
    origin: Instant,
    buckets: [u32; WINDOW_SECS],
    /// The second (since `origin`) the newest bucket counts.
    current: u64,
    seen_any: bool,
}

impl DispatchRate {
    pub(crate) fn new(origin: Instant) -> Self {
        DispatchRate {
            origin,
            buckets: [0; WINDOW_SECS],
            current: 0,
            seen_any: false,
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    /// Clears the buckets of the seconds that passed since the newest one.
    fn roll(&mut self, now: Instant) {
        let second = self.second(now);
        if second <= self.current {
            return;
        }
        let stale = (second - self.current).min(WINDOW_SECS as u64);
        for s in 0..stale {
            let bucket = (second - s) as usize % WINDOW_SECS;
            self.buckets[bucket] = 0;
        }
        self.current = second;
    }

    pub(crate) fn record(&mut self, now: Instant) {
        self.roll(now);
        let bucket = self.current as usize % WINDOW_SECS;
        self.buckets[bucket] = self.buckets[bucket].saturating_add(1);
        self.seen_any = true;
    }

    /// Dispatches per second lately; `None` before the first dispatch.
    pub(crate) fn per_second(&mut self, now: Instant) -> Option<f64> {
        if !self.seen_any {
            return None;
        }
        self.roll(now);
        let count: u32 = self.buckets.iter().sum();
        // The buckets cover the whole seconds before the current one and the
        // part of the current one that has passed; early on, less.
        let elapsed = now.saturating_duration_since(self.origin);
        let covered = Duration::from_secs(WINDOW_SECS as u64 - 1)
            + Duration::from_nanos(u64::from(elapsed.subsec_nanos()));
        // At least a second, so a burst at start-up does not read as a
        // huge rate.
        let span = covered.min(elapsed).max(Duration::from_secs(1));
        Some(f64::from(count) / span.as_secs_f64())
    }

    /// How long `backlog` dispatches take at the rate seen lately, clamped
    /// to [`MIN_RETRY_AFTER`, `MAX_RETRY_AFTER`]. With no dispatch seen yet
    /// there is nothing to go on and the hint is the minimum.
    pub(crate) fn drain_time(&mut self, backlog: f64, now: Instant) -> Duration {
        match self.per_second(now) {
            None => MIN_RETRY_AFTER,
            Some(rate) if rate <= 0.0 => MAX_RETRY_AFTER,
            Some(rate) => {
                let secs = (backlog / rate).min(MAX_RETRY_AFTER.as_secs_f64());
                Duration::from_secs_f64(secs).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(origin: Instant, millis: u64) -> Instant {
        origin + Duration::from_millis(millis)
    }

    #[test]
    fn measures_a_steady_rate() {
        let t0 = Instant::now();
        let mut rate = DispatchRate::new(t0);
        assert_eq!(rate.per_second(t0), None);
        // Five a second for twenty seconds.
        for i in 0..100 {
            rate.record(at(t0, i * 200));
        }
        let r = rate.per_second(at(t0, 20_000)).unwrap();
        assert!((r - 5.0).abs() < 0.6, "{r}");
        assert_eq!(
            rate.drain_time(20.0, at(t0, 20_000)).as_secs_f64().round(),
            4.0
        );
    }

    #[test]
    fn forgets_old_dispatches() {
        let t0 = Instant::now();
        let mut rate = DispatchRate::new(t0);
        for _ in 0..50 {
            rate.record(t0);
        }
        assert_eq!(rate.per_second(at(t0, 500)), Some(50.0));
        assert_eq!(rate.per_second(at(t0, 30_000)), Some(0.0));
        assert_eq!(rate.drain_time(5.0, at(t0, 30_000)), MAX_RETRY_AFTER);
    }

    #[test]
    fn hint_is_clamped() {
        let t0 = Instant::now();
        let mut rate = DispatchRate::new(t0);
        assert_eq!(rate.drain_time(1000.0, t0), MIN_RETRY_AFTER);
        for _ in 0..1000 {
            rate.record(t0);
        }
        assert_eq!(rate.drain_time(1.0, at(t0, 1000)), MIN_RETRY_AFTER);
        assert_eq!(rate.drain_time(1e9, at(t0, 1000)), MAX_RETRY_AFTER);
    }
}
