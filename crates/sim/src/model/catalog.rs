//! `GET /v1/models` in either provider's shape.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{anthropic, gemini, openai};
use crate::state::Shared;
use crate::wire::Format;

/// `GET /v1/models`: the configured providers' models (or one
/// provider's), plus models configured on their own.
pub(super) fn models(shared: &Shared, format: Format, only: Option<&str>) -> Response {
    let config = &shared.config;
    let mut list: Vec<(String, String)> = Vec::new();
    for (p, c) in &config.providers {
        list.extend(c.models.iter().map(|m| (m.clone(), p.clone())));
    }
    for m in config.models.keys() {
        if !list.iter().any(|(id, _)| id == m) {
            list.push((
                m.clone(),
                config.provider_of(m, None, format.default_provider()),
            ));
        }
    }
    list.retain(|(_, p)| only.is_none_or(|only| only == p));
    let body: Value = match format {
        Format::OpenAi | Format::Azure => openai::models(&list),
        Format::Anthropic => anthropic::models(&list),
        Format::Gemini => gemini::models(&list),
    };
    Json(body).into_response()
}
