//! The attack suite (issue 33): each reproduction of the security review
//! run against a real `sluice serve` (the simulated providers in the test
//! process), asserting that it is refused or bounded. The figures each
//! test measures are printed (`cargo test -p sluice --test attacks --
//! --nocapture`) and collected in `docs/security.md`.

mod gateway;
mod slow_readers;
mod spend;
