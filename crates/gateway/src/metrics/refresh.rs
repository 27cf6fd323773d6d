//! Gauges that cost something to read (a count over the whole jobs table,
//! a Redis call per limiter resource) are refreshed at most once per
//! `metrics.refresh_interval_ms`, whoever scrapes and however often: a
//! scraper, or anyone who can reach `/metrics`, cannot turn scrapes into
//! load on the store or on Redis.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// One refresh per interval, shared by the scrapes that ask for it.
#[derive(Debug)]
pub(crate) struct Refresh {
    interval: Duration,
    /// When the last refresh started. Held while one runs, so that
    /// concurrent scrapes wait for it rather than start their own.
    last: Mutex<Option<Instant>>,
}

impl Refresh {
    pub(crate) fn new(interval: Duration) -> Refresh {
        Refresh {
            interval,
            last: Mutex::new(None),
        }
    }

    /// Runs `refresh` unless one started less than the interval ago, and
    /// says whether it ran. A caller that arrives while one runs waits for
    /// it and then finds the values fresh. A refresh dropped half way (its
    /// scraper left) does not count: the next scrape runs it again.
    pub(crate) async fn run_if_due<F, Fut>(&self, refresh: F) -> bool
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut last = self.last.lock().await;
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < self.interval) {
            return false;
        }
        refresh().await;
        // From the start: refreshes start at least an interval apart,
        // however long each takes.
        *last = Some(now);
        super::metrics_refreshed();
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    fn counting(n: &Arc<AtomicU64>) -> impl FnOnce() -> std::future::Ready<()> + use<> {
        let n = n.clone();
        move || {
            n.fetch_add(1, Ordering::Relaxed);
            std::future::ready(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn many_scrapes_in_a_row_share_one_refresh_per_interval() {
        let r = Refresh::new(Duration::from_secs(5));
        let n = Arc::new(AtomicU64::new(0));
        for _ in 0..100 {
            r.run_if_due(counting(&n)).await;
        }
        assert_eq!(n.load(Ordering::Relaxed), 1);
        tokio::time::advance(Duration::from_millis(4_999)).await;
        assert!(!r.run_if_due(counting(&n)).await);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(r.run_if_due(counting(&n)).await);
        assert!(!r.run_if_due(counting(&n)).await);
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_scrapes_wait_for_the_refresh_under_way() {
        let r = Arc::new(Refresh::new(Duration::from_secs(5)));
        let n = Arc::new(AtomicU64::new(0));
        let (release, gate) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let (r, n) = (r.clone(), n.clone());
            tokio::spawn(async move {
                r.run_if_due(|| async move {
                    n.fetch_add(1, Ordering::Relaxed);
                    let _ = gate.await;
                })
                .await
            })
        };
        tokio::task::yield_now().await;
        let others: Vec<_> = (0..50)
            .map(|_| {
                let (r, n) = (r.clone(), n.clone());
                tokio::spawn(async move { r.run_if_due(counting(&n)).await })
            })
            .collect();
        tokio::task::yield_now().await;
        // The refresh is still under way: nobody else has run one, and
        // every other scrape is still waiting for it.
        assert_eq!(n.load(Ordering::Relaxed), 1);
        assert!(others.iter().all(|t| !t.is_finished()));
        release.send(()).unwrap();
        assert!(first.await.unwrap());
        for t in others {
            assert!(!t.await.unwrap());
        }
        assert_eq!(n.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refresh_dropped_half_way_runs_again() {
        let r = Refresh::new(Duration::from_secs(5));
        let n = Arc::new(AtomicU64::new(0));
        let stuck = r.run_if_due(std::future::pending::<()>);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), stuck)
                .await
                .is_err()
        );
        assert!(r.run_if_due(counting(&n)).await);
        assert_eq!(n.load(Ordering::Relaxed), 1);
    }
}
