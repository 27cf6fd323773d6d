//! `POST /v1/chat/completions`, `/v1/embeddings`, `/v1/responses`,
//! `/v1/completions`, `/v1/audio/transcriptions` (multipart),
//! `/v1/images/generations`, `/v1/moderations` (OpenAI format) and
//! `/v1/messages` (Anthropic format), routed by model prefix.
//!
//! The handlers hand the request to the model routes' stack
//! ([`crate::layers::models`]): context → dedup → admission → fallback →
//! provider → usage → retry → limits → bulkhead → upstream.

use axum::extract::State;
use axum::response::Response;

use crate::body::HeadersAndBody;
use crate::layers::auth::Tenant;
use crate::layers::{self, model_call::Incoming};
use crate::state::AppState;
use sluice_usage::Endpoint;

/// `POST /v1/chat/completions`.
pub async fn chat(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Chat, t, hb).await
}

/// `POST /v1/embeddings`.
pub async fn embeddings(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Embeddings, t, hb).await
}

/// `POST /v1/responses`.
pub async fn responses(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Responses, t, hb).await
}

/// `POST /v1/completions` (legacy).
pub async fn completions(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Completions, t, hb).await
}

/// `POST /v1/audio/transcriptions`: a multipart form.
pub async fn transcriptions(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Transcriptions, t, hb).await
}

/// `POST /v1/images/generations`.
pub async fn images(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Images, t, hb).await
}

/// `POST /v1/moderations`.
pub async fn moderations(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Moderations, t, hb).await
}

/// `POST /v1/messages`.
pub async fn messages(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Messages, t, hb).await
}

/// `POST /v1/messages/count_tokens`: the prompt tokens of a Messages
/// request for any model the caller may call, as the gateway estimates
/// them (its `tokens.chars_per_token`, the same estimate its limits and
/// budgets reserve), answered `{"input_tokens": n}`. Nothing is sent
/// upstream.
pub async fn count_tokens(
    State(s): State<AppState>,
    t: Tenant,
    HeadersAndBody(_, body): HeadersAndBody,
) -> Result<axum::Json<serde_json::Value>, crate::error::ApiError> {
    use crate::error::ApiError;
    use serde_json::Value;
    let json: Value = serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest {
        message: format!("malformed JSON body: {e}"),
        param: None,
    })?;
    let model = match json.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.as_str(),
        _ => return Err(ApiError::bad_field("model", "must be a non-empty string")),
    };
    crate::names::check("model", model)?;
    if s.config.provider_index(model).is_none() {
        return Err(ApiError::bad_field(
            "model",
            format!("unknown model prefix in {model:?}"),
        ));
    }
    if t.caller().is_some_and(|c| !c.allows_model(model)) {
        return Err(ApiError::Forbidden(format!(
            "model {model:?} is not allowed for this API key (its `models` allow-list)"
        )));
    }
    if !json.get("messages").is_some_and(Value::is_array) {
        return Err(ApiError::bad_field("messages", "must be an array"));
    }
    let estimate = sluice_usage::WireFormat::Anthropic.dialect().estimate(
        Endpoint::Messages,
        &json,
        s.config.tokens.chars_per_token,
        1,
    );
    Ok(axum::Json(
        serde_json::json!({"input_tokens": estimate.prompt_tokens}),
    ))
}

async fn handle(
    state: AppState,
    endpoint: Endpoint,
    tenant: Tenant,
    HeadersAndBody(headers, body): HeadersAndBody,
) -> Response {
    let req = Incoming {
        state,
        endpoint,
        tenant,
        headers,
        body,
    };
    layers::call_boxed(layers::models::stack(), req).await
}
