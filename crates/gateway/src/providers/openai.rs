//! OpenAI's wire format: `/chat/completions`, `/embeddings`, `/responses`,
//! the legacy `/completions`, `/audio/transcriptions` (multipart),
//! `/images/generations` and `/moderations`, passed through (also
//! Google's, DeepSeek's and others' OpenAI-compatible endpoints, which
//! answer 404 for what they do not have).

use axum::http::{StatusCode, header};
use bytes::Bytes;
use sluice_usage::{self as usage, Endpoint, WireFormat};

use super::{
    Answer, Call, Exchange, Outbound, Passthrough, Provider, RequestError, StreamReader,
    json_headers, missing_limit, pass_answer, secret, to_bytes, to_bytes_with,
};

/// The OpenAI adapter.
#[derive(Debug)]
pub(crate) struct Openai;

fn path(endpoint: Endpoint) -> &'static [&'static str] {
    match endpoint {
        Endpoint::Embeddings => &["embeddings"],
        Endpoint::Responses => &["responses"],
        Endpoint::Completions => &["completions"],
        Endpoint::Transcriptions => &["audio", "transcriptions"],
        Endpoint::Images => &["images", "generations"],
        Endpoint::Moderations => &["moderations"],
        // Not served (see `serves`); chat is the nearest.
        Endpoint::Chat | Endpoint::Messages | Endpoint::Generate => &["chat", "completions"],
    }
}

/// The output limit to send when the client set none: the one its
/// reservation assumed, so that the upstream writes no more than was
/// reserved. Chat reads `max_completion_tokens` or `max_tokens` (the
/// field [`limit_field`] picks is sent), `/responses`
/// `max_output_tokens`; embeddings have no output.
fn output_limit(call: &Call<'_>) -> Option<(&'static str, u64)> {
    let default = call.default_max_tokens;
    match call.endpoint {
        Endpoint::Chat => missing_limit(
            call.body,
            &["max_completion_tokens", "max_tokens"],
            limit_field(call.model),
            default,
        ),
        Endpoint::Responses => missing_limit(
            call.body,
            &["max_output_tokens"],
            "max_output_tokens",
            default,
        ),
        Endpoint::Completions => missing_limit(call.body, &["max_tokens"], "max_tokens", default),
        Endpoint::Embeddings
        | Endpoint::Messages
        | Endpoint::Generate
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => None,
    }
}

/// The chat field that limits a model's output, as its family expects.
/// OpenAI's reasoning models (`o1`, `o3`, `o4-mini`, `gpt-5`, …) refuse
/// `max_tokens` ("Unsupported parameter … Use 'max_completion_tokens'
/// instead") and count their hidden reasoning in `max_completion_tokens`;
/// every other OpenAI-format API (OpenAI's older models, DeepSeek,
/// Google's and MiniMax's compatible endpoints, OpenRouter) reads
/// `max_tokens`, which some do not know by the newer name.
pub(crate) fn limit_field(model: &str) -> &'static str {
    let name = model.rsplit('/').next().unwrap_or(model);
    let family = |p: &str| {
        name.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    if ["o1", "o3", "o4"].into_iter().any(family) || name.starts_with("gpt-5") {
        "max_completion_tokens"
    } else {
        "max_tokens"
    }
}

impl Provider for Openai {
    fn format(&self) -> WireFormat {
        WireFormat::Openai
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        matches!(
            endpoint,
            Endpoint::Chat
                | Endpoint::Embeddings
                | Endpoint::Responses
                | Endpoint::Completions
                | Endpoint::Transcriptions
                | Endpoint::Images
                | Endpoint::Moderations
        )
    }

    fn route(&self) -> &'static str {
        "/v1/chat/completions"
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        if let Some(form) = call.form {
            return upload(base_url, call, form);
        }
        let limit = output_limit(call);
        // The usage of a chat stream comes in a last chunk only if asked
        // for: the gateway asks, and takes the chunk out again if the
        // client did not ask itself.
        // (The legacy completions take `stream_options` as chat does.)
        let chunked = matches!(call.endpoint, Endpoint::Chat | Endpoint::Completions);
        let (body, client_wants_usage) = if call.stream && chunked {
            let mut body = super::with_model(call.body, call.model);
            if let Some((field, n)) = limit {
                body[field] = n.into();
            }
            let asked = usage::request_usage_in_stream(&mut body);
            (to_bytes(&body), asked)
        } else {
            (to_bytes_with(call.body, call.model, limit), true)
        };
        let mut headers = json_headers(call.stream);
        if let Some(key) = call.key {
            secret(
                &mut headers,
                header::AUTHORIZATION,
                &format!("Bearer {key}"),
            )?;
        }
        Ok(Outbound {
            url: super::url(base_url, path(call.endpoint), None)?,
            headers,
            body,
            exchange: Exchange {
                endpoint: call.endpoint,
                client_wants_usage,
                model: call.model.to_owned(),
                array_stream: false,
            },
        })
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        pass_answer(self.dialect(), exchange.endpoint, status, body)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        Box::new(Passthrough::new(self.dialect(), exchange))
    }
}

/// An upload: the client's form with `model` set to the upstream's name
/// for it, as multipart.
fn upload(
    base_url: &str,
    call: &Call<'_>,
    form: &sluice_form::Form,
) -> Result<Outbound, RequestError> {
    let mut form = form.clone();
    form.set_text("model", call.model);
    let (content_type, body) = form.write();
    let mut headers = axum::http::HeaderMap::new();
    let content_type = axum::http::HeaderValue::from_str(&content_type)
        .map_err(|_| RequestError::Setup("a multipart content type".to_owned()))?;
    headers.insert(header::CONTENT_TYPE, content_type);
    if let Some(key) = call.key {
        secret(
            &mut headers,
            header::AUTHORIZATION,
            &format!("Bearer {key}"),
        )?;
    }
    Ok(Outbound {
        url: super::url(base_url, path(call.endpoint), None)?,
        headers,
        body,
        exchange: Exchange {
            endpoint: call.endpoint,
            client_wants_usage: true,
            model: call.model.to_owned(),
            array_stream: false,
        },
    })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;
    use serde_json::{Value, json};

    use super::*;

    /// The body `Openai` sends for `body` to `model`.
    fn sent(endpoint: Endpoint, model: &str, body: Value, stream: bool) -> Value {
        let headers = HeaderMap::new();
        let call = Call {
            endpoint,
            body: &body,
            model,
            stream,
            headers: &headers,
            key: None,
            form: None,
            default_max_tokens: 1_024,
        };
        let out = Openai.request("http://up/v1", &call).unwrap();
        serde_json::from_slice(&out.body).unwrap()
    }

    fn chat(extra: Value) -> Value {
        let mut body =
            json!({"model": "openai/m", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    }

    /// Issue 33: a call without an output limit reserved
    /// `default_max_tokens` but sent none, and the upstream wrote as much
    /// as it liked past the budget's reservation.
    #[test]
    fn the_reserved_output_limit_is_sent_when_the_client_sets_none() {
        for stream in [false, true] {
            let b = sent(Endpoint::Chat, "gpt-4o-mini", chat(json!({})), stream);
            assert_eq!(b["max_tokens"], 1_024, "{b}");
            assert!(b.get("max_completion_tokens").is_none(), "{b}");
            // Reasoning models take only the newer field.
            for model in ["o3-mini", "o1", "o4-mini-2025", "gpt-5", "openai/o3"] {
                let b = sent(Endpoint::Chat, model, chat(json!({})), stream);
                assert_eq!(b["max_completion_tokens"], 1_024, "{model}: {b}");
                assert!(b.get("max_tokens").is_none(), "{model}: {b}");
            }
            // A `null` limit is no limit.
            let b = sent(
                Endpoint::Chat,
                "gpt-4o",
                chat(json!({"max_tokens": null})),
                stream,
            );
            assert_eq!(b["max_tokens"], 1_024, "{b}");
        }
        // Not models of the o-series.
        assert_eq!(limit_field("o10n"), "max_tokens");
        assert_eq!(limit_field("deepseek-chat"), "max_tokens");
        let b = sent(
            Endpoint::Responses,
            "gpt-4o",
            json!({"model": "x", "input": "hi"}),
            false,
        );
        assert_eq!(b["max_output_tokens"], 1_024, "{b}");
        let b = sent(
            Endpoint::Embeddings,
            "e",
            json!({"model": "x", "input": "hi"}),
            false,
        );
        assert_eq!(b, json!({"model": "e", "input": "hi"}));
    }

    #[test]
    fn a_limit_the_client_set_is_sent_as_it_is() {
        for (extra, field) in [
            (json!({"max_tokens": 7}), "max_tokens"),
            (json!({"max_completion_tokens": 7}), "max_completion_tokens"),
        ] {
            for model in ["gpt-4o", "o3-mini"] {
                let b = sent(Endpoint::Chat, model, chat(extra.clone()), false);
                assert_eq!(b[field], 7, "{b}");
                let other = if field == "max_tokens" {
                    "max_completion_tokens"
                } else {
                    "max_tokens"
                };
                assert!(b.get(other).is_none(), "{b}");
                assert_eq!(b["model"], model);
            }
        }
        let b = sent(
            Endpoint::Responses,
            "gpt-4o",
            json!({"model": "x", "input": "hi", "max_output_tokens": 9}),
            false,
        );
        assert_eq!(b["max_output_tokens"], 9, "{b}");
    }
}
