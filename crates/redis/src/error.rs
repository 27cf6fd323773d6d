//! What can go wrong when building a [`RedisLimiter`](crate::RedisLimiter).

/// Errors of `sluice-redis` itself; limiting answers are
/// [`sluice_limit::Error`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not a Redis URL.
    #[error("invalid redis url {url:?}: {source}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why.
        source: redis::RedisError,
    },
    /// A limit in the rules is unusable.
    #[error("invalid limits: {0}")]
    Limits(#[from] sluice_limit::Error),
    /// A configuration value is out of range.
    #[error("invalid redis setting {key}: {reason}")]
    InvalidConfig {
        /// The setting.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Redis could not be reached within the configured timeout.
    #[error("redis is unavailable")]
    Unavailable,
}
