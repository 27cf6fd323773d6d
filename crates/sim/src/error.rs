//! What can go wrong when starting or configuring the sim.

use std::io;
use std::net::SocketAddr;

/// Why the sim could not start or could not take a setting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of range; `key` names it as in the
    /// TOML file (`models.gpt-4o.limits.burst`).
    #[error("invalid sim config at `{key}`: {reason}")]
    InvalidConfig {
        /// The dotted path of the offending key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The listening socket could not be bound.
    #[error("cannot bind the sim to {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why the bind failed.
        #[source]
        source: io::Error,
    },
    /// The bound socket could not report its address.
    #[error("cannot read the sim's bound address")]
    LocalAddr(#[source] io::Error),
}

impl Error {
    pub(crate) fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            key: key.into(),
            reason: reason.into(),
        }
    }
}
