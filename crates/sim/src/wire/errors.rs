//! Error answers in each provider's JSON shape.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Format;
use crate::quota::Dimension;

/// What went wrong with a request, in provider-neutral terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Problem {
    /// The body is not what the endpoint takes; `field` names the culprit
    /// (empty for a body that is not JSON at all).
    BadRequest {
        field: String,
        message: String,
    },
    Unauthorized,
    NotFound {
        message: String,
    },
    /// Over the quota; `on` is `None` for a forced 429.
    RateLimited {
        on: Option<Dimension>,
        model: String,
    },
    /// Larger than the quota can ever allow.
    TooLarge {
        on: Dimension,
        model: String,
    },
    Server(u16),
}

impl Problem {
    pub(crate) fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        Problem::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Problem::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Problem::Unauthorized => StatusCode::UNAUTHORIZED,
            Problem::NotFound { .. } => StatusCode::NOT_FOUND,
            Problem::RateLimited { .. } | Problem::TooLarge { .. } => StatusCode::TOO_MANY_REQUESTS,
            Problem::Server(s) => {
                StatusCode::from_u16(*s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
        }
    }

    fn message(&self) -> String {
        match self {
            Problem::BadRequest { field, message } if field.is_empty() => message.clone(),
            Problem::BadRequest { field, message } => format!("{field}: {message}"),
            Problem::Unauthorized => "invalid or missing API key".to_owned(),
            Problem::NotFound { message } => message.clone(),
            Problem::RateLimited { on, model } => {
                let what = match on {
                    Some(Dimension::Tokens) => "tokens per min",
                    Some(Dimension::Requests) => "requests per second",
                    None => "requests (forced by the sim)",
                };
                format!("Rate limit reached for {model} on {what}. Please try again later.")
            }
            Problem::TooLarge { model, .. } => {
                format!("Request too large for {model} on tokens per min: it can never fit.")
            }
            Problem::Server(_) => {
                "The server had an error while processing your request.".to_owned()
            }
        }
    }

    /// The body as `format` writes it.
    pub(crate) fn body(&self, format: Format) -> Value {
        let message = self.message();
        match format {
            Format::OpenAi | Format::Azure => {
                let (kind, param, code) = match self {
                    Problem::BadRequest { field, .. } => {
                        let param = (!field.is_empty()).then(|| field.clone());
                        ("invalid_request_error", param, None)
                    }
                    Problem::Unauthorized => {
                        ("invalid_request_error", None, Some("invalid_api_key"))
                    }
                    Problem::NotFound { .. } => {
                        ("invalid_request_error", None, Some("model_not_found"))
                    }
                    Problem::RateLimited { on, .. } => {
                        let kind = match on {
                            Some(Dimension::Requests) => "requests",
                            Some(Dimension::Tokens) => "tokens",
                            None => "rate_limit_error",
                        };
                        (kind, None, Some("rate_limit_exceeded"))
                    }
                    Problem::TooLarge { .. } => ("tokens", None, Some("rate_limit_exceeded")),
                    Problem::Server(_) => ("server_error", None, None),
                };
                json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
            }
            Format::Anthropic => {
                let kind = match self {
                    Problem::BadRequest { .. } | Problem::TooLarge { .. } => {
                        "invalid_request_error"
                    }
                    Problem::Unauthorized => "authentication_error",
                    Problem::NotFound { .. } => "not_found_error",
                    Problem::RateLimited { .. } => "rate_limit_error",
                    Problem::Server(503 | 529) => "overloaded_error",
                    Problem::Server(_) => "api_error",
                };
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            Format::Gemini => {
                // google.rpc.Status, with the HTTP code and its canonical
                // status name.
                let status = match self {
                    Problem::BadRequest { .. } => "INVALID_ARGUMENT",
                    Problem::Unauthorized => "UNAUTHENTICATED",
                    Problem::NotFound { .. } => "NOT_FOUND",
                    Problem::RateLimited { .. } | Problem::TooLarge { .. } => "RESOURCE_EXHAUSTED",
                    Problem::Server(503) => "UNAVAILABLE",
                    Problem::Server(_) => "INTERNAL",
                };
                let mut error = json!({
                    "code": self.status().as_u16(),
                    "message": message,
                    "status": status,
                });
                if let Problem::BadRequest { field, .. } = self
                    && !field.is_empty()
                {
                    error["details"] = json!([{
                        "@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": field, "description": message}],
                    }]);
                }
                json!({ "error": error })
            }
        }
    }

    pub(crate) fn response(&self, format: Format) -> Response {
        (self.status(), axum::Json(self.body(format))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        let p = Problem::bad("messages", "must be an array");
        let o = p.body(Format::OpenAi);
        assert_eq!(o["error"]["param"], "messages");
        assert_eq!(o["error"]["type"], "invalid_request_error");
        let a = p.body(Format::Anthropic);
        assert_eq!(a["type"], "error");
        assert_eq!(a["error"]["message"], "messages: must be an array");
        let r = Problem::RateLimited {
            on: Some(Dimension::Requests),
            model: "m".into(),
        };
        assert_eq!(
            r.body(Format::OpenAi)["error"]["code"],
            "rate_limit_exceeded"
        );
        assert_eq!(
            r.body(Format::Anthropic)["error"]["type"],
            "rate_limit_error"
        );
        assert_eq!(
            Problem::Server(529).body(Format::Anthropic)["error"]["type"],
            "overloaded_error"
        );
        let g = p.body(Format::Gemini);
        assert_eq!(g["error"]["code"], 400);
        assert_eq!(g["error"]["status"], "INVALID_ARGUMENT");
        assert_eq!(
            g["error"]["details"][0]["fieldViolations"][0]["field"],
            "messages"
        );
        assert_eq!(
            r.body(Format::Gemini)["error"]["status"],
            "RESOURCE_EXHAUSTED"
        );
    }
}
