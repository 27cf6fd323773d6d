//! An upstream's own quota: a token bucket for requests and one for
//! tokens, both taken or neither. Deliberately simple and separate from
//! `sluice-limit`, so that the gateway is checked against an independent
//! implementation. Time comes in as an argument.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::Limits;

/// Slack for float rounding, so that a bucket refilled to exactly the
/// cost admits it.
const EPSILON: f64 = 1e-9;

#[derive(Debug, Clone)]
pub(crate) struct TokenBucket {
    capacity: f64,
    per_sec: f64,
    tokens: f64,
    at: Instant,
}

/// A bucket as the rate-limit headers tell it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BucketView {
    pub limit: u64,
    pub remaining: u64,
    /// Until the bucket is full again.
    pub reset: Duration,
}

impl TokenBucket {
    pub(crate) fn full(capacity: f64, per_sec: f64, now: Instant) -> Self {
        TokenBucket {
            capacity,
            per_sec,
            tokens: capacity,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_sec).min(self.capacity);
        self.at = self.at.max(now);
    }

    /// How long until `cost` fits: zero if it fits now, `None` if it never
    /// can because it is larger than the bucket.
    fn wait(&self, cost: f64) -> Option<Duration> {
        if cost > self.capacity + EPSILON {
            None
        } else if self.tokens + EPSILON >= cost {
            Some(Duration::ZERO)
        } else {
            Some(secs((cost - self.tokens) / self.per_sec))
        }
    }

    fn view(&self) -> BucketView {
        let remaining = self.tokens.max(0.0);
        BucketView {
            limit: self.capacity as u64,
            remaining: (remaining + EPSILON).floor() as u64,
            reset: secs((self.capacity - remaining) / self.per_sec),
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// Which part of the quota said no.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dimension {
    Requests,
    Tokens,
}

/// The answer to one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Verdict {
    Admit,
    /// Over the limit: come back after this long.
    Wait {
        after: Duration,
        on: Dimension,
    },
    /// Larger than the limit can ever allow.
    Never {
        on: Dimension,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Quota {
    requests: Option<TokenBucket>,
    tokens: Option<TokenBucket>,
}

/// Both buckets, for the headers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct QuotaView {
    pub requests: Option<BucketView>,
    pub tokens: Option<BucketView>,
}

impl Quota {
    pub(crate) fn new(limits: &Limits, now: Instant) -> Self {
        let bucket = |(cap, rate): (f64, f64)| TokenBucket::full(cap, rate, now);
        Quota {
            requests: limits.request_bucket().map(bucket),
            tokens: limits.token_bucket().map(bucket),
        }
    }

    /// Takes one request and `tokens` tokens if both fit now.
    pub(crate) fn try_admit(&mut self, tokens: u64, now: Instant) -> Verdict {
        let mut worst = (Duration::ZERO, Dimension::Requests);
        for (bucket, cost, on) in [
            (&mut self.requests, 1.0, Dimension::Requests),
            (&mut self.tokens, tokens as f64, Dimension::Tokens),
        ] {
            let Some(bucket) = bucket else { continue };
            bucket.refill(now);
            match bucket.wait(cost) {
                None => return Verdict::Never { on },
                Some(wait) if wait > worst.0 => worst = (wait, on),
                Some(_) => {}
            }
        }
        if !worst.0.is_zero() {
            return Verdict::Wait {
                after: worst.0,
                on: worst.1,
            };
        }
        if let Some(b) = &mut self.requests {
            b.tokens -= 1.0;
        }
        if let Some(b) = &mut self.tokens {
            b.tokens -= tokens as f64;
        }
        Verdict::Admit
    }

    pub(crate) fn view(&self) -> QuotaView {
        QuotaView {
            requests: self.requests.as_ref().map(TokenBucket::view),
            tokens: self.tokens.as_ref().map(TokenBucket::view),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_then_rate() {
        let t0 = Instant::now();
        let mut q = Quota::new(&Limits::per_second(2.0).burst(3), t0);
        for _ in 0..3 {
            assert_eq!(q.try_admit(0, t0), Verdict::Admit);
        }
        let Verdict::Wait { after, on } = q.try_admit(0, t0) else {
            panic!("over the burst must wait");
        };
        assert_eq!((after, on), (ms(500), Dimension::Requests));
        assert!(
            matches!(q.try_admit(0, t0 + ms(499)), Verdict::Wait { after, .. } if after <= ms(1))
        );
        assert_eq!(q.try_admit(0, t0 + ms(500)), Verdict::Admit);
        let view = q.view().requests.unwrap();
        assert_eq!((view.limit, view.remaining), (3, 0));
        assert_eq!(view.reset, ms(1500));
    }

    #[test]
    fn never_admits_more_than_rate_times_t_plus_burst() {
        let t0 = Instant::now();
        let mut q = Quota::new(&Limits::per_second(7.0).burst(4), t0);
        let mut admitted = 0u64;
        for step in 0..10_000u64 {
            if q.try_admit(0, t0 + ms(step)) == Verdict::Admit {
                admitted += 1;
            }
        }
        // 9.999 s at 7/s plus the burst of 4, floored.
        assert_eq!(admitted, 4 + 69);
    }

    #[test]
    fn tokens_all_or_nothing_and_never() {
        let t0 = Instant::now();
        let mut q = Quota::new(&Limits::per_second(1.0).burst(2).tokens_per_minute(600), t0);
        assert_eq!(q.try_admit(500, t0), Verdict::Admit);
        // 200 tokens do not fit: the request bucket must not be charged.
        let Verdict::Wait { after, on } = q.try_admit(200, t0) else {
            panic!("must wait for tokens");
        };
        assert_eq!((after, on), (Duration::from_secs(10), Dimension::Tokens));
        assert_eq!(q.view().requests.unwrap().remaining, 1);
        assert_eq!(
            q.try_admit(601, t0),
            Verdict::Never {
                on: Dimension::Tokens
            }
        );
    }

    #[test]
    fn unlimited_always_admits() {
        let t0 = Instant::now();
        let mut q = Quota::new(&Limits::unlimited(), t0);
        for _ in 0..1000 {
            assert_eq!(q.try_admit(u64::MAX, t0), Verdict::Admit);
        }
        assert_eq!(q.view(), QuotaView::default());
    }
}
