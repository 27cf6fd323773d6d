//! The gateway's limits: one [`sluice_limit::SharedLimiter`] in the state
//! (the in-process limiter, or with `[redis]` the one shared by every
//! replica through Redis), and the grants held for callers of the
//! limiter API ([`holds`]).

pub(crate) mod holds;
pub(crate) mod reports;
pub(crate) mod resources;
pub(crate) mod rules;
