//! Gemini's native API for clients (the google-genai SDKs, REST calls):
//! `POST /v1beta/models/{model}:{method}` and the same under
//! `/v1/models/…`, and `GET /v1beta/models`.
//!
//! The model is the path's rest before the last `:`, so a prefixed name
//! arrives as the google-genai SDK sends it, two path segments
//! (`/v1/models/openai/gpt-4o-mini:generateContent`); a name without a
//! provider's prefix is `google/`'s. `generateContent` and
//! `streamGenerateContent` (`?alt=sse`, else a JSON array) go down the
//! model routes' stack like every model call; Gemini providers get the
//! body as it is, others by translation ([`crate::providers`]).
//! `embedContent` and `batchEmbedContents` go down it as the OpenAI
//! embeddings call of an OpenAI-format provider (`gemini/embed.rs`).

mod embed;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sluice_usage::{Endpoint, WireFormat};

use crate::body::HeadersAndBody;
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::layers::{self, model_call::Incoming};
use crate::providers;
use crate::state::AppState;

/// The provider of model names without a prefix, as Gemini clients name
/// Google's models.
const UNPREFIXED: &str = "google";

/// What a Gemini path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Generate { stream: bool },
    CountTokens,
    Embed { batch: bool },
}

/// The model and method of `rest` (`{model}:{method}`).
fn split(rest: &str) -> Result<(&str, Method), ApiError> {
    let rest = rest.strip_prefix("models/").unwrap_or(rest);
    let Some((model, method)) = rest.rsplit_once(':') else {
        return Err(ApiError::NotFound(
            "no such route: expected models/{model}:{method}".into(),
        ));
    };
    let method = match method {
        "generateContent" => Method::Generate { stream: false },
        "streamGenerateContent" => Method::Generate { stream: true },
        "countTokens" => Method::CountTokens,
        "embedContent" => Method::Embed { batch: false },
        "batchEmbedContents" => Method::Embed { batch: true },
        other => {
            return Err(ApiError::NotFound(format!(
                "no such method {:?}: generateContent, streamGenerateContent, countTokens, \
                 embedContent and batchEmbedContents are served",
                crate::names::truncated(other)
            )));
        }
    };
    Ok((model, method))
}

/// `model` as the gateway routes it: its own prefix, else `google/`'s.
fn routed(state: &AppState, model: &str) -> String {
    if state.config.provider_index(model).is_none()
        && !model.contains('/')
        && state.config.providers.iter().any(|p| p.name == UNPREFIXED)
    {
        format!("{UNPREFIXED}/{model}")
    } else {
        model.to_owned()
    }
}

/// Whether `query` asks for server-sent events (`alt=sse`).
fn sse(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "alt" && v == "sse")
    })
}

/// `POST /v1beta/models/{*rest}` and `POST /v1/models/{*rest}`.
pub async fn post(
    State(s): State<AppState>,
    t: Tenant,
    Path(rest): Path<String>,
    RawQuery(query): RawQuery,
    HeadersAndBody(headers, body): HeadersAndBody,
) -> Response {
    match serve(s, t, &rest, query.as_deref(), headers, &body).await {
        Ok(res) | Err(res) => res,
    }
}

async fn serve(
    s: AppState,
    tenant: Tenant,
    rest: &str,
    query: Option<&str>,
    headers: axum::http::HeaderMap,
    body: &[u8],
) -> Result<Response, Response> {
    let err = IntoResponse::into_response;
    let (model, method) = split(rest).map_err(err)?;
    crate::names::check("model", model).map_err(err)?;
    let model = routed(&s, model);
    let json: Value = serde_json::from_slice(body).map_err(|e| {
        err(ApiError::BadRequest {
            message: format!("malformed JSON body: {e}"),
            param: None,
        })
    })?;
    let Value::Object(map) = json else {
        return Err(err(ApiError::BadRequest {
            message: "the body must be a JSON object".into(),
            param: None,
        }));
    };
    match method {
        Method::CountTokens => count_tokens(&s, &tenant, &model, map).map_err(err),
        Method::Embed { batch } => embed(s, tenant, &model, &map, batch, headers).await,
        Method::Generate { stream } => {
            let carried = providers::gemini_carried(map, &model, stream, sse(query));
            let req = Incoming {
                state: s,
                endpoint: Endpoint::Generate,
                tenant,
                headers,
                body: serde_json::to_vec(&carried).unwrap_or_default().into(),
            };
            Ok(layers::call_boxed(layers::models::stack(), req).await)
        }
    }
}

/// `:embedContent` / `:batchEmbedContents` through an OpenAI-format
/// provider's embeddings, the answer in Gemini's shape (an error as the
/// stack gave it).
async fn embed(
    s: AppState,
    tenant: Tenant,
    model: &str,
    map: &serde_json::Map<String, Value>,
    batch: bool,
    headers: axum::http::HeaderMap,
) -> Result<Response, Response> {
    let err = IntoResponse::into_response;
    let format = s
        .config
        .provider_for(model)
        .map(|p| p.format)
        .ok_or_else(|| {
            err(ApiError::bad_field(
                "model",
                format!("unknown model prefix in {model:?}"),
            ))
        })?;
    if !matches!(format, WireFormat::Openai | WireFormat::Azure) {
        return Err(err(ApiError::bad_field(
            "model",
            format!(
                "{model:?} is served in the {format:?} format, which has no embeddings here: \
                 embedContent reaches OpenAI-format providers' embedding models"
            ),
        )));
    }
    let body = embed::to_openai(model, map, batch).map_err(err)?;
    let req = Incoming {
        state: s,
        endpoint: Endpoint::Embeddings,
        tenant,
        headers,
        body: serde_json::to_vec(&body).unwrap_or_default().into(),
    };
    let res = layers::call_boxed(layers::models::stack(), req).await;
    if !res.status().is_success() {
        return Ok(res);
    }
    let (parts, body) = res.into_parts();
    // The stack's own whole answer, read back: bounded by what it read
    // from the provider.
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|e| err(ApiError::BadGateway(format!("reading the embeddings: {e}"))))?;
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let gemini = embed::from_openai(&answer, batch).ok_or_else(|| {
        err(ApiError::BadGateway(
            "the provider's embeddings answer has no `data` vectors".into(),
        ))
    })?;
    let mut res = Json(gemini).into_response();
    // The gateway's headers (request id, rate limits), not the length.
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_LENGTH && name != axum::http::header::CONTENT_TYPE {
            res.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(res)
}

/// `:countTokens`: the prompt tokens as the gateway estimates them (its
/// `tokens.chars_per_token`, what its limits reserve), for any model the
/// caller may call; nothing goes upstream. The body is a request's
/// `contents` (and `systemInstruction`, `tools`), or a whole
/// `generateContentRequest`.
fn count_tokens(
    s: &AppState,
    tenant: &Tenant,
    model: &str,
    mut map: serde_json::Map<String, Value>,
) -> Result<Response, ApiError> {
    if s.config.provider_index(model).is_none() {
        return Err(ApiError::bad_field(
            "model",
            format!("unknown model prefix in {model:?}"),
        ));
    }
    if tenant.caller().is_some_and(|c| !c.allows_model(model)) {
        return Err(ApiError::Forbidden(format!(
            "model {model:?} is not allowed for this API key (its `models` allow-list)"
        )));
    }
    let body = match map.remove("generateContentRequest") {
        Some(Value::Object(inner)) => Value::Object(inner),
        Some(_) => {
            return Err(ApiError::bad_field(
                "generateContentRequest",
                "must be an object",
            ));
        }
        None => Value::Object(map),
    };
    if !body.get("contents").is_some_and(Value::is_array) {
        return Err(ApiError::bad_field("contents", "must be an array"));
    }
    let estimate = WireFormat::Gemini.dialect().estimate(
        Endpoint::Generate,
        &body,
        s.config.tokens.chars_per_token,
        1,
    );
    Ok(Json(json!({"totalTokens": estimate.prompt_tokens})).into_response())
}

/// `GET /v1beta/models`: the models the gateway routes, in Gemini's list
/// shape (the same list as `GET /v1/models`).
pub async fn list(State(s): State<AppState>, _: Tenant) -> Response {
    let catalog = super::catalog::catalog(&s.config, &s.spend.prices);
    let models: Vec<Value> = catalog["data"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let id = m["id"].as_str().unwrap_or_default();
            json!({
                "name": format!("models/{id}"),
                "displayName": id,
                "supportedGenerationMethods":
                    ["generateContent", "streamGenerateContent", "countTokens"],
            })
        })
        .collect();
    Json(json!({"models": models})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_the_rest_before_the_last_colon() {
        assert_eq!(
            split("google/gemini-2.0-flash:generateContent").unwrap(),
            (
                "google/gemini-2.0-flash",
                Method::Generate { stream: false }
            )
        );
        assert_eq!(
            split("models/gemini-2.5-flash:streamGenerateContent").unwrap(),
            ("gemini-2.5-flash", Method::Generate { stream: true })
        );
        assert_eq!(
            split("openai/gpt-4o:countTokens").unwrap().1,
            Method::CountTokens
        );
        assert!(split("gemini-2.5-flash").is_err());
        assert!(split("gemini-2.5-flash:predict").is_err());
    }

    #[test]
    fn only_alt_sse_asks_for_events() {
        assert!(sse(Some("alt=sse")));
        assert!(sse(Some("key=k&alt=sse")));
        assert!(!sse(Some("alt=json")));
        assert!(!sse(None));
    }
}
