//! The credentials the gateway knows — tenant keys from `[[tenants]]`,
//! the admin and metrics tokens — read once at start-up and compared in
//! constant time ([`subtle`]).

use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::config::Config;
use crate::error::StartError;

/// The credentials the gateway knows, read once at start-up.
pub(crate) struct Keys {
    /// Tenant key → tenant name. Empty: the gateway is open.
    pub(crate) tenants: Vec<(Box<[u8]>, Arc<str>)>,
    pub(crate) admin: Option<Box<[u8]>>,
    pub(crate) metrics: Option<Box<[u8]>>,
    /// `ui.token`: reads the dashboard, nothing else.
    pub(crate) dashboard: Option<Box<[u8]>>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the keys never reach a log.
        let names: Vec<&str> = self.tenants.iter().map(|(_, n)| &**n).collect();
        f.debug_struct("Keys")
            .field("tenants", &names)
            .field("admin", &self.admin.is_some())
            .field("metrics", &self.metrics.is_some())
            .field("dashboard", &self.dashboard.is_some())
            .finish()
    }
}

impl Keys {
    /// Reads the tenants' keys (from their variables where given) and the
    /// operator's tokens.
    ///
    /// # Errors
    /// [`StartError::MissingKey`] for a tenant whose variable is not set;
    /// [`StartError::SharedKey`] when one secret would name two roles.
    pub(crate) fn from_config(config: &Config) -> Result<Keys, StartError> {
        let mut tenants = Vec::new();
        for t in &config.tenants {
            let key =
                match (&t.api_key, &t.api_key_env) {
                    (Some(k), _) => k.clone(),
                    // Read with the configuration, from the environment it was
                    // loaded with.
                    (None, Some(var)) => config
                        .secrets
                        .get(var)
                        .map(|k| k.to_string())
                        .ok_or_else(|| StartError::MissingKey {
                            tenant: t.name.clone(),
                            var: var.clone(),
                        })?,
                    (None, None) => continue,
                };
            tenants.push((
                key.into_bytes().into_boxed_slice(),
                Arc::from(t.name.as_str()),
            ));
        }
        let secret = |s: &Option<String>| s.as_ref().map(|s| s.as_bytes().into());
        let dashboard = match (&config.ui.token, &config.ui.token_env) {
            (Some(t), _) => Some(t.as_bytes().into()),
            (None, Some(var)) => Some(
                config
                    .secrets
                    .get(var)
                    .map(|t| t.as_bytes().into())
                    .ok_or_else(|| StartError::MissingToken {
                        key: "ui.token_env",
                        var: var.clone(),
                    })?,
            ),
            (None, None) => None,
        };
        let keys = Keys {
            tenants,
            admin: secret(&config.admin_token),
            metrics: secret(&config.metrics.token),
            dashboard,
        };
        // A tenant key that is also the admin token would make that tenant
        // the operator (and the reverse): refuse to start.
        for (key, name) in &keys.tenants {
            if keys.admin.as_deref() == Some(&**key) {
                return Err(StartError::SharedKey(format!(
                    "tenant {name:?}'s key is also admin_token"
                )));
            }
            if keys.dashboard.as_deref() == Some(&**key) {
                return Err(StartError::SharedKey(format!(
                    "tenant {name:?}'s key is also the dashboard's token"
                )));
            }
        }
        Ok(keys)
    }

    /// True without `[[tenants]]`: no tenant key is asked for.
    pub(crate) fn is_open(&self) -> bool {
        self.tenants.is_empty()
    }

    /// The tenant whose key is `given`. Every key is compared, in constant
    /// time, whichever matches.
    pub(crate) fn tenant(&self, given: &[u8]) -> Option<Arc<str>> {
        let mut found = None;
        for (key, name) in &self.tenants {
            if bool::from(key.as_ref().ct_eq(given)) {
                found = Some(name.clone());
            }
        }
        found
    }

    pub(crate) fn is_admin(&self, given: &[u8]) -> bool {
        self.admin
            .as_deref()
            .is_some_and(|t| bool::from(t.ct_eq(given)))
    }

    /// Whether `given` may read the dashboard: `ui.token` or the admin's.
    pub(crate) fn is_viewer(&self, given: &[u8]) -> bool {
        self.is_admin(given)
            || self
                .dashboard
                .as_deref()
                .is_some_and(|t| bool::from(t.ct_eq(given)))
    }

    /// Whether `given` is a credential of some role: an operator's token
    /// or a static tenant's key, or of the key store's form (whose keys are
    /// checked there, and which no operator token takes).
    pub(crate) fn is_known(&self, given: &[u8]) -> bool {
        let operator_prefixed = [&self.admin, &self.metrics, &self.dashboard]
            .iter()
            .any(|t| {
                t.as_deref()
                    .is_some_and(|t| t.starts_with(sluice_keys::PREFIX.as_bytes()))
            });
        self.is_scraper(given)
            || self.is_viewer(given)
            || self.tenant(given).is_some()
            || (!operator_prefixed && given.starts_with(sluice_keys::PREFIX.as_bytes()))
    }

    /// Whether any token can read the dashboard.
    pub(crate) fn dashboard_enabled(&self) -> bool {
        self.admin.is_some() || self.dashboard.is_some()
    }

    pub(crate) fn is_scraper(&self, given: &[u8]) -> bool {
        self.is_admin(given)
            || self
                .metrics
                .as_deref()
                .is_some_and(|t| bool::from(t.ct_eq(given)))
    }
}
