//! Which fault, if any, an admitted request meets.

use std::time::Duration;

use crate::config::{Faults, MalformedBody};

/// What happens to one admitted request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    None,
    /// Answer with this 5xx status.
    Error(u16),
    /// Send this many events (or half the body) then drop the connection.
    Disconnect {
        after_chunks: u32,
    },
    /// Answer 200 with a body that is not what the format promises
    /// (a stream garbled whatever the body asked for).
    Malformed(MalformedBody),
    /// Sleep this long before answering.
    Hang(Duration),
}

impl Fault {
    /// The name the request log gives it.
    pub(crate) fn name(self) -> Option<&'static str> {
        match self {
            Fault::None => None,
            Fault::Error(_) => Some("error"),
            Fault::Disconnect { .. } => Some("disconnect"),
            Fault::Malformed(_) => Some("malformed"),
            Fault::Hang(_) => Some("hang"),
        }
    }
}

/// A target's faults and the counters that make `*_every` deterministic.
#[derive(Debug, Clone)]
pub(crate) struct FaultState {
    pub faults: Faults,
    admitted: u64,
    errors: u64,
}

impl FaultState {
    pub(crate) fn new(faults: Faults) -> Self {
        FaultState {
            faults,
            admitted: 0,
            errors: 0,
        }
    }

    /// Starts counting "every Nth" afresh.
    pub(crate) fn restart(&mut self) {
        self.admitted = 0;
        self.errors = 0;
    }

    /// Draws the fault for the next admitted request.
    pub(crate) fn draw(&mut self, rng: &mut fastrand::Rng) -> Fault {
        self.admitted += 1;
        let f = &self.faults;
        let n = self.admitted;
        if hits(n, f.hang_every, f.hang_rate, rng) {
            return Fault::Hang(Duration::from_millis(f.hang_ms));
        }
        if hits(n, f.error_every, f.error_rate, rng) {
            // Statuses take turns so that a test sees each of them.
            let len = f.error_statuses.len().max(1) as u64;
            let status = f
                .error_statuses
                .get((self.errors % len) as usize)
                .copied()
                .unwrap_or(500);
            self.errors += 1;
            return Fault::Error(status);
        }
        if hits(n, f.disconnect_every, f.disconnect_rate, rng) {
            return Fault::Disconnect {
                after_chunks: f.disconnect_after_chunks,
            };
        }
        if hits(n, f.malformed_every, f.malformed_rate, rng) {
            return Fault::Malformed(f.malformed_body);
        }
        Fault::None
    }
}

fn hits(n: u64, every: Option<u64>, rate: f64, rng: &mut fastrand::Rng) -> bool {
    every.is_some_and(|e| e > 0 && n.is_multiple_of(e)) || (rate > 0.0 && rng.f64() < rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nth_is_deterministic_and_statuses_rotate() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut s = FaultState::new(Faults {
            error_every: Some(2),
            error_statuses: vec![502, 503],
            disconnect_every: Some(3),
            ..Faults::default()
        });
        let got: Vec<Fault> = (0..6).map(|_| s.draw(&mut rng)).collect();
        assert_eq!(
            got,
            [
                Fault::None,
                Fault::Error(502),
                Fault::Disconnect { after_chunks: 2 },
                Fault::Error(503),
                Fault::None,
                // 6 is a multiple of both: the error wins.
                Fault::Error(502),
            ]
        );
        s.restart();
        assert_eq!(s.draw(&mut rng), Fault::None);
    }

    #[test]
    fn rates_of_zero_and_one() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut never = FaultState::new(Faults::default());
        let mut always = FaultState::new(Faults {
            hang_rate: 1.0,
            hang_ms: 5,
            ..Faults::default()
        });
        for _ in 0..100 {
            assert_eq!(never.draw(&mut rng), Fault::None);
            assert_eq!(always.draw(&mut rng), Fault::Hang(Duration::from_millis(5)));
        }
    }
}
