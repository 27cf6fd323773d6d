//! A deployment's circuit breaker: closed while it answers; open after
//! `failures` failures in a row (5xx, timeouts, refused connections), so
//! that its traffic goes to the other deployments at once; after `open`,
//! half open: one call at a time probes it, and the first that is
//! answered closes the circuit, while one that fails opens it again.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The circuit's state, as `GET /v1/limits` and metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CircuitState {
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }
}

/// Whether a call may go to the deployment now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Yes: the circuit is closed.
    Yes,
    /// As its probe: the circuit is half open and nobody probes it.
    Probe,
    /// No, for this long at least.
    NotFor(Duration),
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant },
    HalfOpen { probing: bool },
}

/// See the module doc.
#[derive(Debug)]
pub(crate) struct Circuit {
    failures: u32,
    open: Duration,
    state: Mutex<State>,
}

impl Circuit {
    /// A closed circuit that opens after `failures` in a row, for `open`.
    pub(crate) fn new(failures: u32, open: Duration) -> Circuit {
        Circuit {
            failures: failures.max(1),
            open,
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while it was held left a valid state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a call may go to it at `now` (nothing changes: see
    /// [`Circuit::take_probe`]).
    pub(crate) fn admits(&self, now: Instant) -> Admit {
        match *self.lock() {
            State::Closed { .. } => Admit::Yes,
            State::Open { until } if until > now => Admit::NotFor(until - now),
            State::Open { .. } | State::HalfOpen { probing: false } => Admit::Probe,
            State::HalfOpen { probing: true } => {
                Admit::NotFor(self.open.min(Duration::from_millis(100)))
            }
        }
    }

    /// Takes the probe at `now`; false when another call took it first.
    pub(crate) fn take_probe(&self, now: Instant) -> bool {
        let mut state = self.lock();
        match *state {
            State::Open { until } if until <= now => {
                *state = State::HalfOpen { probing: true };
                true
            }
            State::HalfOpen { probing: false } => {
                *state = State::HalfOpen { probing: true };
                true
            }
            _ => false,
        }
    }

    /// A call on it was answered; true when that closed it (a probe's).
    pub(crate) fn succeeded(&self, probe: bool) -> bool {
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => {
                *state = State::Closed { failures: 0 };
                false
            }
            // Only a probe closes it: an answer to a call sent before it
            // opened says nothing about now.
            State::HalfOpen { .. } if probe => {
                *state = State::Closed { failures: 0 };
                true
            }
            _ => false,
        }
    }

    /// A call on it failed at `now`; true when that opened it.
    pub(crate) fn failed(&self, now: Instant, probe: bool) -> bool {
        let mut state = self.lock();
        match *state {
            State::Closed { failures } if failures + 1 >= self.failures => {
                *state = State::Open {
                    until: now + self.open,
                };
                true
            }
            State::Closed { failures } => {
                *state = State::Closed {
                    failures: failures + 1,
                };
                false
            }
            State::HalfOpen { .. } if probe => {
                *state = State::Open {
                    until: now + self.open,
                };
                true
            }
            _ => false,
        }
    }

    /// How long a failure keeps it open.
    pub(crate) fn open_time(&self) -> Duration {
        self.open
    }

    /// Another replica found it failing (or probes it): open until
    /// `until` at least. A probe of this replica's in flight then proves
    /// nothing here.
    pub(crate) fn open_until(&self, until: Instant) {
        let mut state = self.lock();
        *state = match *state {
            State::Open { until: later } if later > until => State::Open { until: later },
            _ => State::Open { until },
        };
    }

    /// Another replica's probe was answered: closed.
    pub(crate) fn close(&self) {
        *self.lock() = State::Closed { failures: 0 };
    }

    /// A call on it proved nothing; a probe is given back.
    pub(crate) fn released(&self, probe: bool) {
        let mut state = self.lock();
        if probe && matches!(*state, State::HalfOpen { probing: true }) {
            *state = State::HalfOpen { probing: false };
        }
    }

    /// Its state at `now`.
    pub(crate) fn state(&self, now: Instant) -> CircuitState {
        match *self.lock() {
            State::Closed { .. } => CircuitState::Closed,
            State::Open { until } if until > now => CircuitState::Open,
            State::Open { .. } | State::HalfOpen { .. } => CircuitState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn opens_after_failures_in_a_row_and_closes_on_a_probe() {
        let c = Circuit::new(3, Duration::from_secs(1));
        let now = Instant::now();
        c.failed(now, false);
        c.failed(now, false);
        c.succeeded(false);
        c.failed(now, false);
        c.failed(now, false);
        assert_eq!(c.admits(now), Admit::Yes, "an answer reset the count");
        c.failed(now, false);
        assert_eq!(c.state(now), CircuitState::Open);
        assert_eq!(c.admits(now), Admit::NotFor(Duration::from_secs(1)));
        // An answer to a call sent before it opened does not close it.
        c.succeeded(false);
        assert_eq!(c.state(now), CircuitState::Open);
        tokio::time::advance(Duration::from_secs(1)).await;
        let later = Instant::now();
        assert_eq!(c.admits(later), Admit::Probe);
        assert!(c.take_probe(later));
        assert!(!c.take_probe(later), "one probe at a time");
        assert!(matches!(c.admits(later), Admit::NotFor(_)));
        // A failed probe opens it again for the whole time.
        c.failed(later, true);
        assert_eq!(c.state(later), CircuitState::Open);
        tokio::time::advance(Duration::from_secs(1)).await;
        let after = Instant::now();
        assert!(c.take_probe(after));
        // A probe given back (cancelled) lets another call probe.
        c.released(true);
        assert!(c.take_probe(after));
        assert!(c.succeeded(true), "the probe's answer closes it");
        assert_eq!(c.state(after), CircuitState::Closed);
        assert_eq!(c.admits(after), Admit::Yes);
    }

    #[tokio::test(start_paused = true)]
    async fn another_replicas_marks_open_and_close_it() {
        let c = Circuit::new(3, Duration::from_secs(1));
        let now = Instant::now();
        c.open_until(now + Duration::from_millis(500));
        assert_eq!(c.admits(now), Admit::NotFor(Duration::from_millis(500)));
        // A shorter mark does not shorten it.
        c.open_until(now + Duration::from_millis(100));
        assert_eq!(
            c.state(now + Duration::from_millis(200)),
            CircuitState::Open
        );
        // Its own probe in flight when another replica opens it again:
        // the probe's answer no longer closes it.
        tokio::time::advance(Duration::from_millis(500)).await;
        let later = Instant::now();
        assert!(c.take_probe(later));
        c.open_until(later + Duration::from_secs(1));
        assert!(!c.succeeded(true));
        assert_eq!(c.state(later), CircuitState::Open);
        c.close();
        assert_eq!(c.admits(later), Admit::Yes);
        assert!(!c.failed(later, false), "one failure does not open it");
        assert!(!c.failed(later, false));
        assert!(c.failed(later, false), "the third in a row does");
    }
}
