//! Failed dashboard logins per client address: [`MAX_FAILURES`] a
//! [`WINDOW`], then `/ui/login` answers 429 with `Retry-After` until the
//! window ends, right token or not, so that guessing a token from one
//! address is as slow as this. The address is the TCP peer's (a header a
//! client writes could be anything); behind a reverse proxy every client
//! shares the proxy's, and so its budget. IPv6 clients are counted by
//! their /64, which one host usually holds whole.
//!
//! Bounded: at most [`MAX_ADDRESSES`] are remembered; past it the ended
//! windows go, then the oldest one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Failed logins allowed per address and window.
pub(crate) const MAX_FAILURES: u32 = 5;
/// The window failures are counted in.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);
/// Addresses remembered at most.
const MAX_ADDRESSES: usize = 10_000;

/// Failures by address: when its window began, how many in it.
#[derive(Debug, Default)]
pub(crate) struct FailedLogins {
    by_address: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailedLogins {
    /// `Err(wait)` when `address` has failed [`MAX_FAILURES`] times in its
    /// window: no login is tried until `wait` has passed.
    pub(crate) fn check(&self, address: IpAddr) -> Result<(), Duration> {
        let now = Instant::now();
        let map = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match map.get(&key(address)) {
            Some(&(began, n)) if n >= MAX_FAILURES && now < began + WINDOW => {
                Err(began + WINDOW - now)
            }
            _ => Ok(()),
        }
    }

    /// Counts a failed login of `address`.
    pub(crate) fn failed(&self, address: IpAddr) {
        let now = Instant::now();
        let mut map = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let address = key(address);
        if !map.contains_key(&address) && map.len() >= MAX_ADDRESSES {
            map.retain(|_, (began, _)| now < *began + WINDOW);
            if map.len() >= MAX_ADDRESSES
                && let Some(oldest) = map.iter().min_by_key(|(_, (b, _))| *b).map(|(a, _)| *a)
            {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(address).or_insert((now, 0));
        if now >= entry.0 + WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

/// The address failures are counted under: an IPv4 address (mapped ones
/// included) as it is, an IPv6 one by its /64.
fn key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut segments = v6.segments();
                segments[4..].fill(0);
                IpAddr::V6(segments.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn five_failures_a_minute_then_wait_for_the_window() {
        let f = FailedLogins::default();
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        for _ in 0..MAX_FAILURES {
            assert_eq!(f.check(a), Ok(()));
            f.failed(a);
        }
        tokio::time::advance(Duration::from_secs(20)).await;
        assert_eq!(f.check(a), Err(Duration::from_secs(40)));
        assert_eq!(f.check(b), Ok(()), "another address is not held back");
        tokio::time::advance(Duration::from_secs(39)).await;
        assert!(f.check(a).is_err(), "still pending a second before the end");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(f.check(a), Ok(()), "a new window");
        f.failed(a);
        assert_eq!(f.check(a), Ok(()), "one failure in the new window");
    }

    #[tokio::test(start_paused = true)]
    async fn ipv6_counts_by_its_64_and_mapped_v4_as_v4() {
        let f = FailedLogins::default();
        for i in 0..MAX_FAILURES {
            f.failed(ip(&format!("2001:db8:1:2::{i:x}")));
        }
        assert!(f.check(ip("2001:db8:1:2:ffff::1")).is_err(), "same /64");
        assert_eq!(f.check(ip("2001:db8:1:3::1")), Ok(()), "another /64");
        for _ in 0..MAX_FAILURES {
            f.failed(ip("::ffff:192.0.2.7"));
        }
        assert!(f.check(ip("192.0.2.7")).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_table_is_bounded() {
        let f = FailedLogins::default();
        let first = ip("10.0.0.0");
        for _ in 0..MAX_FAILURES {
            f.failed(first);
        }
        for i in 1..=MAX_ADDRESSES as u32 {
            tokio::time::advance(Duration::from_millis(1)).await;
            f.failed(IpAddr::V4((0x0a00_0000 + i).into()));
        }
        let len = f.by_address.lock().unwrap().len();
        assert_eq!(len, MAX_ADDRESSES);
        assert_eq!(f.check(first), Ok(()), "the oldest went first");
    }
}
