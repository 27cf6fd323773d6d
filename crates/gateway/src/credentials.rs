//! The credentials the gateway sends upstream, per API and per model
//! provider, chosen by the calling tenant.
//!
//! Each upstream has a shared credential (`auth_env` of an API,
//! `api_key_env` of a provider) and tenants' own
//! (`[tenants.apis.{name}]`, `[tenants.providers.{name}]`). A tenant's
//! call sends its own; else the shared one where `shared_auth` (the
//! default) lets it serve every tenant; else it is refused with 403
//! `no_credential`. The choice is [`Credentials::for_tenant`], the one
//! the job kinds make too, so that a proxied call, a model call and a job
//! for the same tenant send the same credential.

use std::borrow::Cow;
use std::collections::HashMap;

use foldhash::fast::RandomState;
use sluice_jobs_http::{Credentials, Secret};

use crate::config::{Config, ProviderAuth, ProviderConfig, TenantConfig};
use crate::error::ApiError;
use crate::error::StartError;

/// Every API's and provider's credentials, built once at start-up from
/// the values read with the configuration.
///
/// Looked up on every call: a provider's by its place in
/// `config.providers` (a model call knows it), an API's by name with
/// foldhash (the names are the configuration's, fixed at start; SipHash
/// cost more than the rest of the lookup).
#[derive(Debug, Default)]
pub(crate) struct UpstreamCredentials {
    apis: HashMap<String, Credentials, RandomState>,
    /// In the order of `config.providers`.
    providers: Vec<Credentials>,
}

/// What is not configured: no credential is sent.
static NONE: std::sync::LazyLock<Credentials> = std::sync::LazyLock::new(Credentials::none);

impl UpstreamCredentials {
    /// # Errors
    /// [`StartError::MissingCredential`] for a tenant's own credential
    /// whose variable has no value (a configuration built in code without
    /// it; a loaded one is refused at load).
    pub(crate) fn from_config(config: &Config) -> Result<UpstreamCredentials, StartError> {
        let mut out = UpstreamCredentials::default();
        for api in &config.apis {
            let own = (config.tenants.iter())
                .filter_map(|t| Some((t, t.apis.get(&api.name)?.auth_env.as_str())));
            let shared = (api.auth_env.as_deref(), api.shared_auth);
            let key = format!("apis.{}.auth_env", api.name);
            out.apis
                .insert(api.name.clone(), build(config, shared, own, &key)?);
        }
        for p in &config.providers {
            let own = (config.tenants.iter())
                .filter_map(|t| Some((t, t.providers.get(&p.name)?.api_key_env.as_str())));
            let shared = (p.api_key_env.as_deref(), p.shared_auth);
            let key = format!("providers.{}.api_key_env", p.name);
            out.providers.push(build(config, shared, own, &key)?);
        }
        Ok(out)
    }

    /// The API's credentials (none for an unknown API).
    pub(crate) fn api(&self, name: &str) -> &Credentials {
        self.apis.get(name).unwrap_or(&NONE)
    }

    /// The credentials of the provider at `index` in `config.providers`
    /// (none past their end).
    pub(crate) fn provider(&self, index: usize) -> &Credentials {
        self.providers.get(index).unwrap_or(&NONE)
    }
}

/// The value `tenant` sends to `upstream` (an API or a provider, as
/// `what` says), if any.
///
/// # Errors
/// 403 `no_credential` naming the upstream when the tenant may use none.
pub(crate) fn value_for<'c>(
    credentials: &'c Credentials,
    tenant: &str,
    what: &str,
    upstream: &str,
) -> Result<Option<Cow<'c, str>>, ApiError> {
    let secret = credentials.for_tenant(tenant).map_err(|e| {
        ApiError::NoCredential(format!("no credential for {what} {upstream:?}: {e}"))
    })?;
    // The gateway's secrets are values read with the configuration, so
    // this reads nothing from the environment.
    secret
        .map(|s| s.read().map_err(ApiError::Internal))
        .transpose()
}

/// Whether provider `p` of `config` can be called with a key of the
/// gateway's: [`KeyState::Missing`] when it takes a key and its shared one
/// is not set (calls from tenants without a key of their own are refused
/// with 503 `provider_not_configured`, see [`not_configured`]).
pub(crate) fn key_state<'c>(config: &'c Config, p: &'c ProviderConfig) -> KeyState<'c> {
    if p.auth == ProviderAuth::None {
        return KeyState::NotNeeded;
    }
    match p.api_key_env.as_deref() {
        Some(var) if config.secrets.get(var).is_some() => KeyState::Set,
        var => KeyState::Missing(var),
    }
}

/// See [`key_state`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyState<'c> {
    /// Its shared key is set.
    Set,
    /// `auth = "none"`.
    NotNeeded,
    /// It takes a key and has none: the variable that would hold it, if
    /// one is named.
    Missing(Option<&'c str>),
}

impl KeyState<'_> {
    /// How `/readyz` names it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            KeyState::Set => "ready",
            KeyState::NotNeeded => "no_key_needed",
            KeyState::Missing(_) => "not_configured",
        }
    }
}

/// The 503 for a call to `p`, which takes a key and has none for the
/// caller, naming what sets it.
pub(crate) fn not_configured(p: &ProviderConfig) -> ApiError {
    let fix = match p.api_key_env.as_deref() {
        Some(var) => format!("set {var} in the gateway's environment"),
        None => format!(
            "name the variable holding its key in `providers.{}.api_key_env`",
            p.name
        ),
    };
    ApiError::NotConfigured(format!(
        "provider {:?} is not configured: it has no API key ({fix} and restart; a provider \
         that takes no key, such as a local vLLM or Ollama, takes `auth = \"none\"`)",
        p.name
    ))
}

/// The start-up warning naming every provider that takes a key and has
/// none, with its variable; `None` when there is none.
pub(crate) fn missing_keys_warning(config: &Config) -> Option<String> {
    let missing: Vec<String> = (config.providers.iter())
        .filter_map(|p| match key_state(config, p) {
            KeyState::Missing(Some(var)) => Some(format!("{} ({var} is not set)", p.name)),
            KeyState::Missing(None) => Some(format!("{} (no api_key_env)", p.name)),
            _ => None,
        })
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "providers without an API key: {}. Calls to them answer 503 provider_not_configured \
             (tenants with a key of their own for one still reach it); set the variables, or \
             `auth = \"none\"` for a provider that takes no key",
            missing.join(", ")
        )
    })
}

fn build<'c>(
    config: &'c Config,
    (shared_var, shared_auth): (Option<&str>, bool),
    own: impl Iterator<Item = (&'c TenantConfig, &'c str)>,
    key: &str,
) -> Result<Credentials, StartError> {
    // A shared variable that is not set sends nothing, as before tenants
    // could have their own: the defaults name variables few set.
    let shared = shared_var.and_then(|v| config.secrets.get(v));
    let mut c = match shared {
        Some(v) => Credentials::shared(Secret::Value(v.clone())),
        None => Credentials::none(),
    };
    if !shared_auth {
        c = c.not_shared();
    }
    for (t, var) in own {
        let value = config
            .secrets
            .get(var)
            .ok_or_else(|| StartError::MissingCredential {
                tenant: t.name.clone(),
                key: key.to_owned(),
                var: var.to_owned(),
            })?;
        c = c.tenant(t.name.clone(), Secret::Value(value.clone()));
    }
    Ok(c)
}
