//! Which credential a call sends upstream on behalf of a tenant.
//!
//! An API (or model provider) may hold one shared credential and any
//! number of tenants' own. A tenant's call uses its own if it has one;
//! else the shared one if the operator lets it serve every tenant; else
//! nothing is sent and the call is refused ([`NoCredential`]). One
//! tenant's credential never serves another.
//!
//! ```
//! use sluice_jobs_http::{Credentials, Secret};
//!
//! let slack = Credentials::shared(Secret::env("SLACK_TOKEN"))
//!     .tenant("acme", Secret::value("xoxb-acme"))
//!     .not_shared();
//! assert_eq!(slack.for_tenant("acme").unwrap().unwrap().read().unwrap(), "xoxb-acme");
//! // Globex has none of its own, and the shared token is not shared.
//! assert!(slack.for_tenant("globex").is_err());
//! // An API with no credential at all sends none.
//! assert_eq!(Credentials::none().for_tenant("globex"), Ok(None));
//! ```

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A secret: the value itself, or an environment variable read when a
/// call is made. Its `Debug` shows a variable's name, never a value.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    /// Read from this environment variable at each call.
    Env(String),
    /// This value, read once by whoever built the configuration.
    Value(Arc<str>),
}

impl Secret {
    /// A secret in the environment variable `var`.
    pub fn env(var: impl Into<String>) -> Self {
        Secret::Env(var.into())
    }

    /// A secret given as its value.
    pub fn value(value: impl Into<Arc<str>>) -> Self {
        Secret::Value(value.into())
    }

    /// The secret's value.
    ///
    /// # Errors
    /// Names the variable when it is not set (or not Unicode).
    pub fn read(&self) -> Result<Cow<'_, str>, String> {
        match self {
            Secret::Value(v) => Ok(Cow::Borrowed(v)),
            Secret::Env(var) => std::env::var(var)
                .map(Cow::Owned)
                .map_err(|_| format!("environment variable {var} is not set")),
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Env(var) => f.debug_tuple("Env").field(var).finish(),
            Secret::Value(_) => f.write_str("Value(<redacted>)"),
        }
    }
}

/// The credentials of one upstream: a shared one, tenants' own, and
/// whether the shared one serves tenants without their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    shared: Option<Secret>,
    share: bool,
    tenants: BTreeMap<String, Secret>,
}

impl Default for Credentials {
    fn default() -> Self {
        Self::none()
    }
}

/// Why a tenant's call may not be made: it has no credential of its own,
/// and the upstream's shared one is not shared with it (or there is none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tenant {tenant:?} has no credential of its own, and {}",
    if *.shared_exists { "the shared one serves no other tenant" } else { "there is no shared one" }
)]
pub struct NoCredential {
    /// The tenant.
    pub tenant: String,
    /// Whether there is a shared credential, withheld from this tenant.
    pub shared_exists: bool,
}

impl Credentials {
    /// No credential: calls go without one.
    pub fn none() -> Self {
        Self {
            shared: None,
            share: true,
            tenants: BTreeMap::new(),
        }
    }

    /// One credential for every tenant (until [`not_shared`](Self::not_shared)).
    pub fn shared(secret: Secret) -> Self {
        Self {
            shared: Some(secret),
            ..Self::none()
        }
    }

    /// The shared credential serves no tenant without its own: those are
    /// refused.
    #[must_use]
    pub fn not_shared(mut self) -> Self {
        self.share = false;
        self
    }

    /// `tenant`'s own credential (replacing an earlier one).
    #[must_use]
    pub fn tenant(mut self, tenant: impl Into<String>, secret: Secret) -> Self {
        self.tenants.insert(tenant.into(), secret);
        self
    }

    /// Whether no credential of any kind is configured.
    pub fn is_none(&self) -> bool {
        self.shared.is_none() && self.tenants.is_empty()
    }

    /// The credential `tenant`'s calls send: its own, else the shared one
    /// if it is shared; `None` when no credential is configured at all.
    ///
    /// # Errors
    /// [`NoCredential`] when credentials are configured but none may be
    /// sent for `tenant`: sending nothing would hide the refusal, and
    /// another tenant's is never sent.
    pub fn for_tenant(&self, tenant: &str) -> Result<Option<&Secret>, NoCredential> {
        if let Some(own) = self.tenants.get(tenant) {
            return Ok(Some(own));
        }
        match &self.shared {
            Some(shared) if self.share => Ok(Some(shared)),
            None if self.tenants.is_empty() => Ok(None),
            shared => Err(NoCredential {
                tenant: tenant.to_owned(),
                shared_exists: shared.is_some(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_then_shared_then_refused() {
        let shared = Credentials::shared(Secret::value("s")).tenant("acme", Secret::value("a"));
        let read = |c: &Credentials, t| {
            c.for_tenant(t)
                .map(|s| s.map(|s| s.read().unwrap().into_owned()))
        };
        assert_eq!(read(&shared, "acme"), Ok(Some("a".into())));
        assert_eq!(read(&shared, "globex"), Ok(Some("s".into())));
        let own_only = shared.clone().not_shared();
        assert_eq!(read(&own_only, "acme"), Ok(Some("a".into())));
        assert_eq!(
            read(&own_only, "globex"),
            Err(NoCredential {
                tenant: "globex".into(),
                shared_exists: true
            })
        );
        // Tenants' own credentials and no shared one: the others are
        // refused rather than sent upstream bare.
        let no_shared = Credentials::none().tenant("acme", Secret::value("a"));
        let e = no_shared.for_tenant("globex").unwrap_err();
        assert!(e.to_string().contains("no shared one"), "{e}");
        assert_eq!(Credentials::none().for_tenant("x"), Ok(None));
        assert_eq!(Credentials::none().not_shared().for_tenant("x"), Ok(None));
    }

    #[test]
    fn values_never_show_in_debug() {
        let c = Credentials::shared(Secret::value("xoxb-secret")).tenant("a", Secret::env("A_TOK"));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("xoxb-secret") && shown.contains("A_TOK"),
            "{shown}"
        );
    }

    #[test]
    fn an_unset_variable_is_named() {
        let e = Secret::env("SLUICE_TEST_SURELY_UNSET_VAR")
            .read()
            .unwrap_err();
        assert!(e.contains("SLUICE_TEST_SURELY_UNSET_VAR"), "{e}");
    }
}
