//! Waits that are most often over before they begin: a body that came
//! with its head, a grant or a pool slot free at once. Each is polled
//! once first, and what a real wait needs — a timer in the runtime's
//! wheel, a watch on the shutdown grace — is armed only when it is not
//! ready: arming and disarming one costs more than the poll.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;
use tokio::time::error::Elapsed;

/// Polls `fut` once: its output if it is ready, else `Poll::Pending`
/// (with `fut` to be polled again, its waker registered).
pub(crate) async fn first_poll<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
    let mut fut = fut;
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

/// `fut` within `timeout`, as [`tokio::time::timeout`] bounds it, with no
/// timer when `fut` is ready at its first poll (the time it may take is
/// counted from that poll).
///
/// # Errors
/// [`Elapsed`] when `fut` was not ready in time.
pub(crate) async fn within<F: Future>(timeout: Duration, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    if let Poll::Ready(out) = first_poll(fut.as_mut()).await {
        return Ok(out);
    }
    tokio::time::timeout(timeout, fut).await
}

/// `fut` by `deadline`, as [`tokio::time::timeout_at`] bounds it, with no
/// timer when `fut` is ready at its first poll.
///
/// # Errors
/// [`Elapsed`] when `fut` was not ready by `deadline`.
pub(crate) async fn by<F: Future>(deadline: Instant, fut: F) -> Result<F::Output, Elapsed> {
    let mut fut = std::pin::pin!(fut);
    if let Poll::Ready(out) = first_poll(fut.as_mut()).await {
        return Ok(out);
    }
    tokio::time::timeout_at(deadline, fut).await
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::Instant;

    use super::{by, within};

    #[tokio::test(start_paused = true)]
    async fn a_ready_future_passes_even_past_its_deadline() {
        let past = Instant::now();
        tokio::time::advance(Duration::from_secs(1)).await;
        // As `timeout_at`: the future is polled before the deadline is.
        assert_eq!(by(past, async { 7 }).await.ok(), Some(7));
        assert_eq!(within(Duration::ZERO, async { 8 }).await.ok(), Some(8));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pending_future_is_cut_at_its_deadline_and_not_before() {
        let sleep = |ms| tokio::time::sleep(Duration::from_millis(ms));
        let deadline = Instant::now() + Duration::from_millis(100);
        assert!(by(deadline, sleep(150)).await.is_err());
        assert_eq!(Instant::now(), deadline);
        let deadline = Instant::now() + Duration::from_millis(100);
        assert!(by(deadline, sleep(50)).await.is_ok());
        let started = Instant::now();
        assert!(within(Duration::from_millis(30), sleep(40)).await.is_err());
        assert_eq!(Instant::now() - started, Duration::from_millis(30));
        assert!(within(Duration::from_millis(30), sleep(20)).await.is_ok());
    }
}
