//! Azure OpenAI: OpenAI's wire format addressed to a deployment. The
//! provider's `base_url` is the resource's endpoint
//! (`https://{resource}.openai.azure.com`, optionally with its own
//! `?api-version=…`); a model's name after the provider's prefix is the
//! deployment: `azure/gpt4o-eu` calls
//! `{base_url}/openai/deployments/gpt4o-eu/chat/completions?api-version=…`
//! with the key in `api-key`. The body, the answer and the stream are
//! OpenAI's, built and read as the OpenAI adapter does.

use axum::http::{HeaderName, StatusCode, header};
use bytes::Bytes;
use sluice_usage::{Endpoint, WireFormat};

use super::openai::Openai;
use super::{
    Answer, BadField, Call, Exchange, Outbound, Passthrough, Provider, RequestError, StreamReader,
    pass_answer, secret,
};

/// The `api-version` sent when the base URL names none: the general
/// availability release that carries stream usage (`stream_options`).
pub(crate) const API_VERSION: &str = "2024-10-21";

const API_KEY: HeaderName = HeaderName::from_static("api-key");

/// The Azure OpenAI adapter.
#[derive(Debug)]
pub(crate) struct Azure;

/// The path after the deployment.
fn path(endpoint: Endpoint) -> &'static [&'static str] {
    match endpoint {
        Endpoint::Embeddings => &["embeddings"],
        // Not served (see `serves`); chat is the nearest.
        Endpoint::Chat
        | Endpoint::Responses
        | Endpoint::Messages
        | Endpoint::Generate
        | Endpoint::Completions
        | Endpoint::Transcriptions
        | Endpoint::Images
        | Endpoint::Moderations => &["chat", "completions"],
    }
}

impl Provider for Azure {
    fn format(&self) -> WireFormat {
        WireFormat::Azure
    }

    fn serves(&self, endpoint: Endpoint) -> bool {
        matches!(endpoint, Endpoint::Chat | Endpoint::Embeddings)
    }

    fn route(&self) -> &'static str {
        "/v1/chat/completions"
    }

    /// The deployment is one path segment of the URL: letters, digits,
    /// `-`, `_` and `.` (what Azure allows in a deployment's name).
    fn check_model(&self, model: &str) -> Result<(), BadField> {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if model.is_empty() || !model.chars().all(plain) || model == "." || model == ".." {
            return Err(BadField::new(
                "model",
                format!(
                    "{model:?} cannot be an Azure deployment: use letters, digits, '-', '_', '.' \
                     after the provider's prefix"
                ),
            ));
        }
        Ok(())
    }

    fn request(&self, base_url: &str, call: &Call<'_>) -> Result<Outbound, RequestError> {
        // OpenAI's body (the model, the output limit, stream usage), sent
        // without OpenAI's bearer header.
        let mut out = Openai.request(base_url, &Call { key: None, ..*call })?;
        let (base, query) = match base_url.split_once('?') {
            Some((base, query)) if query.contains("api-version=") => (base, query.to_owned()),
            Some((base, _)) => (base, format!("api-version={API_VERSION}")),
            None => (base_url, format!("api-version={API_VERSION}")),
        };
        let mut segments = vec!["openai", "deployments", call.model];
        segments.extend_from_slice(path(call.endpoint));
        out.url = super::url(base, &segments, Some(&query))?;
        out.headers.remove(header::AUTHORIZATION);
        if let Some(key) = call.key {
            secret(&mut out.headers, API_KEY, key)?;
        }
        Ok(out)
    }

    fn answer(&self, exchange: &Exchange, status: StatusCode, body: Bytes) -> Answer {
        pass_answer(self.dialect(), exchange.endpoint, status, body)
    }

    fn stream(&self, exchange: &Exchange) -> Box<dyn StreamReader> {
        Box::new(Passthrough::new(self.dialect(), exchange))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;
    use serde_json::json;

    use super::*;

    fn sent(base: &str, endpoint: Endpoint, stream: bool) -> Outbound {
        let body = json!({"model": "azure/gpt4o-eu", "stream": stream,
            "messages": [{"role": "user", "content": "hi"}]});
        let headers = HeaderMap::new();
        let call = Call {
            endpoint,
            body: &body,
            model: "gpt4o-eu",
            stream,
            headers: &headers,
            key: Some("az-key"),
            form: None,
            default_max_tokens: 256,
        };
        Azure.request(base, &call).unwrap()
    }

    #[test]
    fn a_call_goes_to_its_deployment_with_the_api_key() {
        let out = sent("https://res.openai.azure.com", Endpoint::Chat, false);
        assert_eq!(
            out.url,
            "https://res.openai.azure.com/openai/deployments/gpt4o-eu/chat/completions?api-version=2024-10-21"
        );
        assert_eq!(out.headers["api-key"], "az-key");
        assert!(out.headers.get(header::AUTHORIZATION).is_none());
        let body: serde_json::Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(body["max_tokens"], 256);
        // A version of one's own in the base URL is kept.
        let out = sent(
            "https://res.openai.azure.com/?api-version=2025-04-01-preview",
            Endpoint::Embeddings,
            false,
        );
        assert!(
            out.url.ends_with(
                "/openai/deployments/gpt4o-eu/embeddings?api-version=2025-04-01-preview"
            ),
            "{}",
            out.url
        );
        // A stream asks for its usage, as OpenAI's does.
        let out = sent("https://res.openai.azure.com", Endpoint::Chat, true);
        let body: serde_json::Value = serde_json::from_slice(&out.body).unwrap();
        assert_eq!(body["stream_options"]["include_usage"], true);
    }

    #[test]
    fn a_deployment_is_one_segment() {
        for bad in ["", "..", "a/b", "a b", "a?x=1"] {
            assert!(Azure.check_model(bad).is_err(), "{bad:?}");
        }
        assert!(Azure.check_model("gpt-4o_eu.1").is_ok());
    }
}
