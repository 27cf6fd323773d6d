//! `POST /v1/chat/completions`, `/v1/embeddings`, `/v1/responses` (OpenAI
//! format) and `/v1/messages` (Anthropic format), routed by model prefix.
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

/// `POST /v1/messages`.
pub async fn messages(State(s): State<AppState>, t: Tenant, hb: HeadersAndBody) -> Response {
    handle(s, Endpoint::Messages, t, hb).await
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
