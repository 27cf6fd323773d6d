//! What went wrong in the store.

/// An error of the key store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A field of a request is unusable; `field` names it as the API and
    /// the CLI spell it (`limits.requests_per_second`, `tier`, `name`).
    #[error("{field}: {reason}")]
    Invalid {
        /// The field.
        field: String,
        /// Why it is refused.
        reason: String,
    },
    /// No such tenant, tier or key.
    #[error("no {what} {name:?}")]
    NotFound {
        /// `tenant`, `tier` or `key`.
        what: &'static str,
        /// Its name or id.
        name: String,
    },
    /// A tenant or tier of that name exists already.
    #[error("{what} {name:?} exists already")]
    Conflict {
        /// `tenant` or `tier`.
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The operation does not apply to the key or tenant in its state
    /// (rotating a revoked key, unblocking a revoked one).
    #[error("{what} {name:?} is {state}: cannot {action}")]
    WrongState {
        /// `tenant` or `key`.
        what: &'static str,
        /// Its name or id.
        name: String,
        /// Its state.
        state: &'static str,
        /// What was asked.
        action: &'static str,
    },
    /// The database failed or is unreachable.
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The schema could not be brought up to date.
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored row does not read back (edited by hand, or a newer schema).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The system's random source failed.
    #[error("random source: {0}")]
    Random(String),
}

impl Error {
    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Why a presented key is refused. Each names what the caller can do
/// nothing about but ask the operator; none says whether a key id exists
/// beyond what the state implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not of the form `sk-sluice-<id>_<secret>`.
    #[error("not a sluice API key")]
    Malformed,
    /// No such key, or the secret does not match.
    #[error("unknown API key")]
    Unknown,
    /// The key was revoked.
    #[error("API key revoked")]
    Revoked,
    /// The key was rotated and its grace period is over.
    #[error("API key rotated and its grace period is over")]
    Expired,
    /// The key is blocked.
    #[error("API key blocked")]
    KeyBlocked,
    /// The key's tenant is blocked.
    #[error("tenant blocked")]
    TenantBlocked,
}
