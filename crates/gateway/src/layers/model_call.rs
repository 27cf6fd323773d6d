//! A model call as the layers of the model routes see it: as its handler
//! hands it over ([`Incoming`]), read and checked ([`Call`]), and once per
//! candidate model ([`Attempt`]). Composed into a stack in
//! [`super::models`]; the layers import these types from here, not from
//! the composition.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::Value;
use sluice_admit::Ticket;
use tokio::time::Instant;

use super::Notes;
use super::admission::Queued;
use super::context::{Context, Parse};
use super::observe::Routed;
use super::step::Stateful;
use crate::config::ProviderConfig;
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::ledger::Draft;
use crate::providers;
use crate::state::AppState;
use sluice_usage::{self as usage, Endpoint};

mod upload;

/// A model call as its handler hands it over.
#[derive(Debug)]
pub(crate) struct Incoming {
    /// The gateway's state, brought down the stack.
    pub state: AppState,
    /// The route called.
    pub endpoint: Endpoint,
    /// The caller.
    pub tenant: Tenant,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, unread.
    pub body: Bytes,
}

/// A model call, read and checked: what every candidate model shares.
#[derive(Debug)]
pub(crate) struct Call {
    /// The request's context.
    pub ctx: Context,
    /// The route called.
    pub endpoint: Endpoint,
    /// The body, a JSON object with a `model`: for an upload, its text
    /// fields and its file's name and size (`model_call/upload.rs`).
    pub json: Value,
    /// An upload's form, sent upstream with its `model` rewritten.
    pub form: Option<sluice_form::Form>,
    /// The client's headers.
    pub headers: HeaderMap,
    /// The model asked for, its alias resolved (`[aliases]`).
    pub model: String,
    /// Where the provider serving `model` is in `config.providers`: found
    /// and checked once, when the call is read ([`Call::provider`]). For a
    /// pool, its first deployment's that serves the route.
    pub provider: usize,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// The key under which identical requests share this one's answer
    /// (set by dedup).
    pub share: Option<String>,
    /// A hash of the body as sent, for a call with a client id: a
    /// request joins another with its id only when their bodies match.
    pub fingerprint: Option<u64>,
}

/// One candidate model for a call (the model asked for, or a fallback).
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    /// The call, shared by every candidate.
    pub call: Arc<Call>,
    /// The candidate.
    pub model: String,
    /// For a pooled candidate, the deployment chosen for this try (its
    /// index in the pool), set by `layers/pool.rs`.
    pub deployment: Option<usize>,
}

impl Call {
    /// The provider serving the model asked for (in the route's wire
    /// format), as [`provider_index`] found it when the call was read.
    pub(crate) fn provider<'a>(&self, state: &'a AppState) -> &'a ProviderConfig {
        // An index into the configuration of the state that read the
        // call, which never changes.
        &state.config.providers[self.provider]
    }

    /// The provider serving `model`, the model asked for or a fallback:
    /// the one found when the call was read for the first.
    ///
    /// # Errors
    /// As [`provider_index`], for a fallback.
    pub(crate) fn provider_for<'a>(
        &self,
        state: &'a AppState,
        model: &str,
    ) -> Result<&'a ProviderConfig, ApiError> {
        self.provider_index_for(state, model)
            .map(|i| &state.config.providers[i])
    }

    /// Where [`Call::provider_for`]'s provider is in `config.providers`
    /// (what its credentials are found by).
    ///
    /// # Errors
    /// As [`provider_index`], for a fallback.
    pub(crate) fn provider_index_for(
        &self,
        state: &AppState,
        model: &str,
    ) -> Result<usize, ApiError> {
        if model == self.model {
            Ok(self.provider)
        } else {
            provider_index(state, model, self.endpoint)
        }
    }
}

impl Queued for Box<Call> {
    fn ticket(&self) -> Ticket {
        // The model's own lane: requests for a model at its limit wait
        // without holding the slots that requests for other models need.
        let ticket = self.ctx.ticket().with_lane(self.model.as_str());
        match &self.share {
            Some(key) => ticket.with_dedup_key(key.clone()),
            None => ticket,
        }
    }

    fn ctx(&self) -> &Context {
        &self.ctx
    }
}

/// The route of `endpoint`, as metrics and traces name it.
pub(crate) fn route(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Chat => "/v1/chat/completions",
        Endpoint::Embeddings => "/v1/embeddings",
        Endpoint::Responses => "/v1/responses",
        Endpoint::Messages => "/v1/messages",
        Endpoint::Generate => "/v1beta/models/{model}:generateContent",
        Endpoint::Completions => "/v1/completions",
        Endpoint::Transcriptions => "/v1/audio/transcriptions",
        Endpoint::Images => "/v1/images/generations",
        Endpoint::Moderations => "/v1/moderations",
    }
}

/// Whether the gateway streams `endpoint`'s answers (a streamed image or
/// transcript has events of its own, which no reader here scans for
/// usage: refused rather than passed unmetered).
fn streams(endpoint: Endpoint) -> bool {
    endpoint.generates_text()
}

impl Stateful for Incoming {
    fn state(&self) -> &AppState {
        &self.state
    }
}

impl Routed for Incoming {
    fn route(&self) -> &'static str {
        route(self.endpoint)
    }
}

impl Parse for Incoming {
    type Parsed = Box<Call>;

    fn tenant(&self) -> &Tenant {
        &self.tenant
    }

    fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    fn parse(
        self,
        state: &AppState,
        ctx: Context,
        notes: &mut Notes,
    ) -> Result<Box<Call>, ApiError> {
        let checked = Instant::now();
        let (json, form) = if self.endpoint == Endpoint::Transcriptions {
            let (json, form) = upload::read(&self.headers, self.body.clone())?;
            (json, Some(form))
        } else {
            let json = serde_json::from_slice(&self.body).map_err(|e| ApiError::BadRequest {
                message: format!("malformed JSON body: {e}"),
                param: None,
            })?;
            (json, None)
        };
        if !json.is_object() {
            return Err(ApiError::BadRequest {
                message: "the body must be a JSON object".into(),
                param: None,
            });
        }
        let asked = match json.get("model") {
            None | Some(Value::Null) => return Err(ApiError::bad_field("model", "is required")),
            Some(Value::String(m)) if !m.trim().is_empty() => m.as_str(),
            Some(Value::String(_)) => {
                return Err(ApiError::bad_field("model", "must not be empty"));
            }
            Some(_) => return Err(ApiError::bad_field("model", "must be a string")),
        };
        // Bounded before anything (a lane, a resource, a trace, a ledger
        // record) is made of it.
        crate::names::check("model", asked)?;
        let model = state.config.resolve_alias(asked).to_owned();
        let alias = (model != asked).then(|| asked.to_owned());
        let index = provider_index(state, &model, self.endpoint)?;
        let prov = &state.config.providers[index];
        if !ctx.allows_model(&model) {
            return Err(ApiError::Forbidden(format!(
                "model {model:?} is not allowed for this API key (its `models` allow-list)"
            )));
        }
        usage::check_bounds(&json)
            .map_err(|(field, message)| ApiError::bad_field(field, message))?;
        if usage::is_stream(&json) && !streams(self.endpoint) {
            return Err(ApiError::bad_field(
                "stream",
                format!(
                    "{} is not streamed through the gateway: send stream false",
                    route(self.endpoint)
                ),
            ));
        }
        notes.label = Some(model.clone());
        // Traced from here on: a request refused for its body costs no
        // disk (`sluice_requests_total` counts it by status).
        let mut trace = super::observe::begin_trace(state, &ctx, route(self.endpoint), "POST");
        let named = match &alias {
            Some(a) => vec![("alias", crate::trace::Field::Text(a.clone()))],
            None => Vec::new(),
        };
        trace.record_fields("auth", ctx.started, checked, named);
        trace.model = Some(model.clone());
        notes.trace = Some(trace);
        if state.observers.ledger.as_ref().is_some() {
            // The body's `user` is the caller's string: kept at most
            // `names::MAX_NAME` bytes in the ledger.
            let user = json
                .get("user")
                .and_then(Value::as_str)
                .map(crate::names::truncated);
            let mut draft = Draft::model(&ctx, route(self.endpoint), &model, user);
            draft.record.provider.clone_from(&prov.name);
            draft.record.alias.clone_from(&alias);
            draft.keep_bodies(&state.config.request_log, &self.body);
            notes.ledger = Some(draft);
        }
        let fingerprint = ctx.client_id.then(|| {
            use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
            // Fixed keys: the same body hashes the same in every request.
            BuildHasherDefault::<DefaultHasher>::default().hash_one(&self.body[..])
        });
        // Boxed: every layer down to fallback moves the call (twice:
        // its argument, then its own local), about 400 bytes a move.
        Ok(Box::new(Call {
            stream: usage::is_stream(&json),
            ctx,
            endpoint: self.endpoint,
            json,
            form,
            headers: self.headers,
            model,
            provider: index,
            share: None,
            fingerprint,
        }))
    }
}

/// Where the provider serving `model` in `endpoint`'s format is in the
/// configuration's providers; for a pool's model, the first of its
/// deployments' that serves `endpoint`.
///
/// # Errors
/// 400 naming `model` when no provider serves it, or one does in another
/// wire format.
fn provider_index(state: &AppState, model: &str, endpoint: Endpoint) -> Result<usize, ApiError> {
    if let Some(pool) = state.config.pool_index(model) {
        return pool_provider(state, pool, endpoint);
    }
    let index = state.config.provider_index(model).ok_or_else(|| {
        let known: Vec<String> = state
            .config
            .providers
            .iter()
            .map(|p| format!("{}/", p.name))
            .collect();
        ApiError::bad_field(
            "model",
            format!(
                "unknown model prefix in {model:?}: expected one of {}",
                known.join(", ")
            ),
        )
    })?;
    let p = &state.config.providers[index];
    let Some(adapter) = providers::for_call(p.format, endpoint) else {
        let own = providers::for_format(p.format);
        if !endpoint.generates_text() && endpoint != Endpoint::Embeddings {
            // Images, transcripts and moderations have no counterpart to
            // translate to: only an OpenAI-format API serves them.
            return Err(ApiError::bad_field(
                "model",
                format!(
                    "{model:?} is served by {}, whose {} API has no {}: only OpenAI-format providers serve it",
                    p.name,
                    providers::provider_name(p.format),
                    route(endpoint)
                ),
            ));
        }
        return Err(ApiError::bad_field(
            "model",
            format!(
                "{model:?} is served by {} in another wire format: use {}",
                p.name,
                own.route()
            ),
        ));
    };
    // One path segment after the prefix: `gem/cheap/../pro` would pass an
    // allow-list written for `gem/cheap*` and be priced as `cheap`.
    crate::names::check_model_segments(model)?;
    adapter
        .check_model(super::provider::upstream_model(p, model))
        .map_err(|b| ApiError::bad_field(&b.field, b.message))?;
    Ok(index)
}

/// The first of pool `pool`'s deployments' providers that serves
/// `endpoint`.
///
/// # Errors
/// 400 naming `model` when none does.
fn pool_provider(state: &AppState, pool: usize, endpoint: Endpoint) -> Result<usize, ApiError> {
    let p = &state.config.pools[pool];
    let serving = state
        .limits
        .pools
        .get(pool)
        .into_iter()
        .flat_map(|p| p.deployments.iter())
        .map(|d| d.provider)
        .find(|&i| providers::for_format(state.config.providers[i].format).serves(endpoint));
    serving.ok_or_else(|| {
        ApiError::bad_field(
            "model",
            format!(
                "no deployment of the pool {:?} serves {}",
                p.model,
                route(endpoint)
            ),
        )
    })
}
