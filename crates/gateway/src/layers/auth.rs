//! Who may call what.
//!
//! Every route has exactly one [`Owner`], and each owner one extractor that
//! a handler takes before anything else (before its body is read):
//!
//! | owner | extractor | who |
//! |---|---|---|
//! | [`Owner::Anyone`] | [`Anyone`] | anyone who can reach the port (health) |
//! | [`Owner::Tenant`] | [`Tenant`] | a tenant by its key, acting on its own resources only |
//! | [`Owner::Admin`] | [`Admin`] | the operator, by `admin_token` |
//! | [`Owner::Scraper`] | [`Scraper`] | a metrics scraper, by `metrics.token` (or `admin_token`) |
//! | [`Owner::Viewer`] | [`Viewer`] | a dashboard viewer, by `ui.token` (or `admin_token`), or a browser logged in at `/ui` |
//!
//! Without `[[tenants]]` and without tenants in the key store the gateway
//! is *open*: there is no tenant key, and `x-sluice-workspace` names the
//! tenant (a key issued by the key store, `sk-sluice-…`, is still checked
//! and names its own). That is for one user on one
//! machine; the gateway says so at start-up and in `/readyz`. Admin calls
//! still take `admin_token`, in every mode.
//!
//! Secrets are compared in constant time ([`subtle`]), and every bearer
//! credential is read by one parser ([`bearer`]). A tenant's key may also
//! come the way the Anthropic and Gemini SDKs send theirs ([`tenant_key`]):
//! `x-api-key`, `x-goog-api-key`, or Gemini's `?key=`.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};

use crate::error::ApiError;
use crate::state::AppState;

/// The workspace of requests that name none, when no tenants are configured.
pub const DEFAULT_WORKSPACE: &str = "default";

/// The longest workspace name `x-sluice-workspace` may give.
const MAX_WORKSPACE: usize = 256;

/// Who a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Anyone who can reach the port: health checks only.
    Anyone,
    /// A tenant, acting on its own resources and the shared limits.
    Tenant,
    /// The operator (`admin_token`).
    Admin,
    /// A metrics scraper (`metrics.token`, or `admin_token`).
    Scraper,
    /// A dashboard viewer (`ui.token`, or `admin_token`, or a browser
    /// session opened with either): read-only.
    Viewer,
}

impl Owner {
    /// As written in docs and tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Owner::Anyone => "anyone",
            Owner::Tenant => "tenant",
            Owner::Admin => "admin",
            Owner::Scraper => "scraper",
            Owner::Viewer => "viewer",
        }
    }
}

/// The credential of `Authorization: Bearer <credential>` (the scheme in
/// any case, surrounding blanks ignored); `None` without the header.
///
/// # Errors
/// 401 for a header that is not visible ASCII or not a bearer credential.
pub fn bearer(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(axum::http::header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| ApiError::Unauthorized("`Authorization` is not visible ASCII".into()))?
        .trim();
    let (scheme, credential) = value.split_once(' ').unwrap_or((value, ""));
    let credential = credential.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || credential.is_empty() {
        return Err(ApiError::Unauthorized(
            "`Authorization` must be `Bearer <key>`".into(),
        ));
    }
    Ok(Some(credential))
}

/// The headers that carry a tenant's key when `Authorization` does not:
/// the Anthropic SDK's and the google-genai SDK's.
const KEY_HEADERS: [HeaderName; 2] = [
    HeaderName::from_static("x-api-key"),
    HeaderName::from_static("x-goog-api-key"),
];

/// The longest key `?key=` may give (keys in headers are bounded by the
/// server's header limits).
const MAX_QUERY_KEY: usize = 512;

/// The tenant key of a request: `Authorization: Bearer <key>`, else
/// `x-api-key`, else `x-goog-api-key`, else the `key` parameter of
/// `query` (Gemini's `?key=`); `None` when none is given.
///
/// # Errors
/// 401 naming the header or parameter that is malformed.
pub fn tenant_key<'a>(
    headers: &'a HeaderMap,
    query: Option<&'a str>,
) -> Result<Option<std::borrow::Cow<'a, str>>, ApiError> {
    use std::borrow::Cow;
    if let Some(key) = bearer(headers)? {
        return Ok(Some(Cow::Borrowed(key)));
    }
    for name in &KEY_HEADERS {
        if let Some(v) = headers.get(name) {
            let v = v
                .to_str()
                .map_err(|_| ApiError::Unauthorized(format!("`{name}` is not visible ASCII")))?
                .trim();
            if v.is_empty() {
                return Err(ApiError::Unauthorized(format!("`{name}` is empty")));
            }
            return Ok(Some(Cow::Borrowed(v)));
        }
    }
    let Some(query) = query else {
        return Ok(None);
    };
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if name == "key" {
            if value.is_empty() || value.len() > MAX_QUERY_KEY {
                return Err(ApiError::Unauthorized(format!(
                    "`key` must hold 1 to {MAX_QUERY_KEY} bytes"
                )));
            }
            // Owned: a parameter may be percent-encoded.
            return Ok(Some(Cow::Owned(value.into_owned())));
        }
    }
    Ok(None)
}

/// What a refusal says a tenant's key is missing from.
const KEY_MISSING: &str = "missing `Authorization: Bearer <key>` (or `x-api-key`, \
                           `x-goog-api-key`, `?key=`)";

/// The TCP peer's address of the request, when the server recorded it.
fn peer(parts: &Parts) -> Option<std::net::IpAddr> {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Refuses, with 429 and `Retry-After`, a client address that has given a
/// wrong operator token (admin, dashboard, metrics) too often: the rule of
/// `/ui/login` ([`crate::dashboard::logins`], counted apart), so that
/// guessing a token on the API routes is as slow as at the login.
fn check_guesses(state: &AppState, parts: &Parts) -> Result<(), ApiError> {
    use crate::dashboard::logins::{MAX_FAILURES, WINDOW};
    match peer(parts).map(|a| state.observers.board.tokens.check(a)) {
        Some(Err(wait)) => Err(ApiError::RateLimited {
            resource: "wrong tokens from this address".into(),
            retry_after: Some(wait),
            policy: Some((u64::from(MAX_FAILURES), WINDOW)),
        }),
        _ => Ok(()),
    }
}

/// Counts `given`, a wrong token for the route, from the request's
/// address, when it is a guess: a credential of another role (a tenant's
/// key, the dashboard's or the metrics token) presented where it does not
/// serve is a mistake, not a guess, and is not counted.
fn guessed(state: &AppState, parts: &Parts, given: &str) {
    if state.stores.keys.is_known(given.as_bytes()) {
        return;
    }
    if let Some(a) = peer(parts) {
        state.observers.board.tokens.failed(a);
    }
}

/// Anyone may call the route: health checks. Taking it says so.
#[derive(Debug, Clone, Copy)]
pub struct Anyone;

impl<S: Send + Sync> FromRequestParts<S> for Anyone {
    type Rejection = ApiError;

    async fn from_request_parts(_: &mut Parts, _: &S) -> Result<Self, ApiError> {
        Ok(Anyone)
    }
}

/// The tenant calling: by its key (a static one from `[[tenants]]`, or
/// one issued through the key store), or, on an open gateway, by
/// `x-sluice-workspace` (default `default`).
#[derive(Debug, Clone)]
pub struct Tenant {
    name: Arc<str>,
    /// The key store's answer for a key issued through it: its limits
    /// and allow-lists. `None` for static keys and open gateways.
    caller: Option<Arc<sluice_keys::Caller>>,
}

impl Tenant {
    /// The tenant's (workspace's) name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the key store says of the caller's key, if it was issued
    /// through it.
    pub fn caller(&self) -> Option<&Arc<sluice_keys::Caller>> {
        self.caller.as_ref()
    }

    /// Who the caller is in the audit trail: `key:{id}` for a key of the
    /// key store, else `tenant:{name}`.
    pub fn actor(&self) -> String {
        match &self.caller {
            Some(c) => format!("key:{}", c.key_id),
            None => format!("tenant:{}", self.name),
        }
    }

    /// Authenticates the caller of `headers` by the static keys alone
    /// (or, open, by its workspace).
    ///
    /// # Errors
    /// 401 for a missing or unknown key; 400 for a bad `x-sluice-workspace`.
    #[cfg(test)]
    pub(crate) fn from_headers(state: &AppState, headers: &HeaderMap) -> Result<Tenant, ApiError> {
        Self::from_request(state, headers, None)
    }

    /// [`Tenant::from_headers`], the key also taken from `query`'s `key`
    /// (see [`tenant_key`]).
    fn from_request(
        state: &AppState,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Tenant, ApiError> {
        if state.is_open() {
            return workspace(headers).map(|w| Tenant {
                name: Arc::from(w),
                caller: None,
            });
        }
        let key = tenant_key(headers, query)?
            .ok_or_else(|| ApiError::Unauthorized(KEY_MISSING.into()))?;
        state
            .stores
            .keys
            .tenant(key.as_bytes())
            .map(|name| Tenant { name, caller: None })
            .ok_or_else(|| ApiError::Unauthorized("unknown API key".into()))
    }

    /// Authenticates the caller of `headers`: a key of the key store's
    /// form (`sk-sluice-…`) is checked there (through its cache), in every
    /// mode; anything else as [`Tenant::from_headers`] does.
    ///
    /// # Errors
    /// 401 for a missing, unknown, revoked or expired key; 403 for a
    /// blocked key or tenant; 503 when the store must be read and cannot.
    pub(crate) async fn authenticate(
        state: &AppState,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<Tenant, ApiError> {
        if let Some(registry) = state.stores.keystore.as_ref()
            && let Some(key) = tenant_key(headers, query)?
            && key.starts_with(sluice_keys::PREFIX)
        {
            // Boxed: the key store's future (a database read on a cache
            // miss) takes kilobytes, and inline it would make the handler's
            // future of every request, keyed or not, as large; axum copies
            // that future whole into its box.
            let caller = Box::pin(registry.authenticate(&key)).await?;
            return Ok(Tenant {
                name: caller.tenant.clone(),
                caller: Some(caller),
            });
        }
        Tenant::from_request(state, headers, query)
    }
}

/// The workspace an open gateway's caller names.
fn workspace(headers: &HeaderMap) -> Result<&str, ApiError> {
    // A name made once: a lookup by `&str` parses the name every time.
    const HEADER: HeaderName = HeaderName::from_static("x-sluice-workspace");
    let Some(v) = headers.get(&HEADER) else {
        return Ok(DEFAULT_WORKSPACE);
    };
    let w = v
        .to_str()
        .map_err(|_| ApiError::bad_header(HEADER.as_str(), "not visible ASCII"))?
        .trim();
    if w.len() > MAX_WORKSPACE {
        return Err(ApiError::bad_header(
            HEADER.as_str(),
            format!("longer than {MAX_WORKSPACE}"),
        ));
    }
    Ok(if w.is_empty() { DEFAULT_WORKSPACE } else { w })
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        Tenant::authenticate(state, &parts.headers, parts.uri.query()).await
    }
}

/// The operator: `Authorization: Bearer <admin_token>`.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if state.stores.keys.admin.is_none() {
            return Err(ApiError::Forbidden(
                "admin calls are disabled: set admin_token".into(),
            ));
        }
        let given = bearer(&parts.headers)?.ok_or_else(|| {
            ApiError::Unauthorized("missing `Authorization: Bearer <admin token>`".into())
        })?;
        check_guesses(state, parts)?;
        if !state.stores.keys.is_admin(given.as_bytes()) {
            guessed(state, parts, given);
            return Err(ApiError::Forbidden("wrong admin token".into()));
        }
        Ok(Admin)
    }
}

/// A metrics scraper: `Authorization: Bearer <metrics.token>` (or the admin
/// token). An open gateway without `metrics.token` lets anyone scrape.
#[derive(Debug, Clone, Copy)]
pub struct Scraper;

impl FromRequestParts<AppState> for Scraper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let keys = &state.stores.keys;
        let given = bearer(&parts.headers)?;
        if keys.metrics.is_none() && state.is_open() {
            return Ok(Scraper);
        }
        if keys.metrics.is_none() && keys.admin.is_none() {
            return Err(ApiError::Forbidden(
                "metrics need a token where tenants are configured: set metrics.token".into(),
            ));
        }
        let given = given.ok_or_else(|| {
            ApiError::Unauthorized("missing `Authorization: Bearer <metrics token>`".into())
        })?;
        check_guesses(state, parts)?;
        if !keys.is_scraper(given.as_bytes()) {
            guessed(state, parts, given);
            return Err(ApiError::Forbidden("wrong metrics token".into()));
        }
        Ok(Scraper)
    }
}

/// A dashboard viewer: `Authorization: Bearer <ui.token or admin_token>`,
/// or the session cookie a browser got from `POST /ui/login`. Read-only
/// routes only: a cookie is sent by the browser on its own, so it must
/// never authorize a change.
#[derive(Debug, Clone, Copy)]
pub struct Viewer;

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let keys = &state.stores.keys;
        if !keys.dashboard_enabled() {
            return Err(ApiError::Forbidden(
                "the dashboard needs a token: set ui.token_env (read-only) or admin_token".into(),
            ));
        }
        if let Some(given) = bearer(&parts.headers)? {
            check_guesses(state, parts)?;
            if !keys.is_viewer(given.as_bytes()) {
                guessed(state, parts, given);
                return Err(ApiError::Forbidden("wrong dashboard token".into()));
            }
            return Ok(Viewer);
        }
        if state.observers.board.sessions.check(&parts.headers) {
            return Ok(Viewer);
        }
        Err(ApiError::Unauthorized(
            "missing `Authorization: Bearer <dashboard or admin token>` (or log in at /ui)".into(),
        ))
    }
}

#[cfg(test)]
#[path = "auth/tests.rs"]
mod tests;
