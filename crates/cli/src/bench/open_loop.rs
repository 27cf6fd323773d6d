//! A fixed-rate, open-loop request stream with coordinated omission
//! corrected.
//!
//! Request `i` is *due* at `start + i / rate` and is sent then, whatever
//! the earlier ones are doing; its latency is counted from when it was
//! due, not from when it left. A sender that waits for answers, or a
//! pacer that falls behind, would otherwise not send (and so not measure)
//! exactly the requests that a stall delays: the stall would show up as
//! one slow sample instead of all the samples it held up.
//!
//! Pacing runs on its own OS thread with `std::thread::sleep`, which
//! wakes within tens of microseconds on Linux; tokio's timer rounds up to
//! the millisecond, as much as the latency being measured.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::Semaphore;

/// When each request of a fixed-rate stream is due.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub start: Instant,
    pub rate: f64,
}

impl Schedule {
    /// When request `i` is due.
    pub fn due(&self, i: u64) -> Instant {
        self.start + Duration::from_secs_f64(i as f64 / self.rate)
    }
}

/// Records one request's latency from when it was due (at least 1 µs).
pub fn record(h: &mut Histogram<u64>, due: Instant, done: Instant) {
    let us = done.saturating_duration_since(due).as_micros() as u64;
    h.saturating_record(us.max(1));
}

/// What a stream measured.
#[derive(Debug)]
pub struct Measured {
    /// Latency from due time to the end of the answer, in µs, of every
    /// request (errors included: they took that long too).
    pub latency: Histogram<u64>,
    /// Requests sent.
    pub sent: u64,
    /// Requests that failed (transport error or non-2xx).
    pub errors: u64,
    /// Requests not sent because `max_outstanding` were already under way;
    /// each is recorded with the run's length as its latency.
    pub dropped: u64,
}

/// Sends `make()` at `rate` a second for `duration`, at most
/// `max_outstanding` at once, on the current runtime.
pub async fn run<F>(rate: f64, duration: Duration, max_outstanding: usize, make: F) -> Measured
where
    F: Fn() -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    let count = (rate * duration.as_secs_f64()).round().max(1.0) as u64;
    let histogram = Arc::new(Mutex::new(sluice_sim::swarm::latency_histogram()));
    let errors = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let slots = Arc::new(Semaphore::new(max_outstanding));
    let runtime = tokio::runtime::Handle::current();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let pacer = {
        let histogram = Arc::clone(&histogram);
        let errors = Arc::clone(&errors);
        let make = Arc::new(make);
        std::thread::spawn(move || {
            let schedule = Schedule {
                start: Instant::now() + Duration::from_millis(5),
                rate,
            };
            let mut dropped = 0;
            for i in 0..count {
                let due = schedule.due(i);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    dropped += 1;
                    let mut h = histogram.lock().unwrap_or_else(|e| e.into_inner());
                    record(&mut h, due, due + duration);
                    continue;
                };
                let request = make();
                let (histogram, errors, done) =
                    (Arc::clone(&histogram), Arc::clone(&errors), done_tx.clone());
                runtime.spawn(async move {
                    let ok = send(request).await;
                    let finished = Instant::now();
                    if !ok {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    record(
                        &mut histogram.lock().unwrap_or_else(|e| e.into_inner()),
                        due,
                        finished,
                    );
                    drop(slot);
                    let _ = done.send(());
                });
            }
            dropped
        })
    };
    // Wait for every request sent; the channel closes when the pacer and
    // every request task are done with it.
    while done_rx.recv().await.is_some() {}
    let dropped = tokio::task::spawn_blocking(move || pacer.join().unwrap_or(0))
        .await
        .unwrap_or(0);
    let latency = histogram.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Measured {
        latency,
        sent: count - dropped,
        errors: errors.load(std::sync::atomic::Ordering::Relaxed),
        dropped,
    }
}

/// Sends and reads the whole answer: whether it was a 2xx.
pub async fn send(request: reqwest::RequestBuilder) -> bool {
    match request.send().await {
        Ok(r) => {
            let ok = r.status().is_success();
            r.bytes().await.is_ok() && ok
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that answers one request at a time in 0.5 ms, and stalls
    /// for 100 ms once, fed 1,000 requests a second for a second.
    /// Returns (due, sent, done) per request for a sender that can only
    /// send when the server is free — as a closed-loop sender does.
    fn stalled_run() -> Vec<(Instant, Instant, Instant)> {
        let schedule = Schedule {
            start: Instant::now(),
            rate: 1_000.0,
        };
        let mut free_at = schedule.start;
        (0..1_000)
            .map(|i| {
                let due = schedule.due(i);
                let sent = due.max(free_at);
                let service = if i == 500 { 100_000 } else { 500 };
                let done = sent + Duration::from_micros(service);
                free_at = done;
                (due, sent, done)
            })
            .collect()
    }

    #[test]
    fn due_times_follow_the_rate() {
        let s = Schedule {
            start: Instant::now(),
            rate: 200.0,
        };
        assert_eq!(s.due(0), s.start);
        assert_eq!(s.due(200) - s.start, Duration::from_secs(1));
        assert_eq!(s.due(3) - s.due(2), Duration::from_millis(5));
    }

    #[test]
    fn latency_from_due_time_shows_what_a_stall_held_up() {
        let run = stalled_run();
        let mut corrected = sluice_sim::swarm::latency_histogram();
        let mut naive = sluice_sim::swarm::latency_histogram();
        for &(due, sent, done) in &run {
            record(&mut corrected, due, done);
            record(&mut naive, sent, done);
        }
        // Measured from when it was sent, the stall is one slow sample in
        // a thousand: the p99 says all is well.
        assert_eq!(naive.value_at_quantile(0.99), 500);
        assert!(naive.max() >= 100_000);
        // Measured from when it was due, the ~200 requests held up behind
        // the stall (100 ms of them, then 100 ms of draining the backlog)
        // wait from 100 ms down: the p90 to p99 see them.
        assert!(corrected.value_at_quantile(0.90) >= 40_000);
        assert!(corrected.value_at_quantile(0.99) >= 90_000);
        assert_eq!(corrected.value_at_quantile(0.5), 500);
        assert_eq!(corrected.len(), naive.len());
    }

    #[test]
    fn records_at_least_a_microsecond() {
        let mut h = sluice_sim::swarm::latency_histogram();
        let t = Instant::now();
        record(&mut h, t, t);
        // Done "before" due (clock granularity) counts as 1 µs, not a panic.
        record(&mut h, t + Duration::from_millis(1), t);
        assert_eq!((h.len(), h.max()), (2, 1));
    }
}
