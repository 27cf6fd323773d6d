//! A model's 200 that is not an answer: an HTML page from a proxy in
//! front of the provider, an empty body, JSON cut or garbled. Passed on,
//! the client's SDK fails on it and the ledger bills it at the
//! reservation; it is an upstream failure like a 5xx instead: sent again
//! (when the call may be), and a 502 to the client when it keeps coming,
//! billed at zero (there is no usage in it to bill).
//!
//! Checked for buffered answers of model calls only (a stream passes
//! through as it comes, and an API's body is the API's business): the
//! body is read here, within the request's deadline, and handed on whole.

use axum::body::Body;
use axum::http::header;
use bytes::Bytes;
use tokio::time::Instant;

use crate::client::UpstreamResponse;

/// What the check found.
pub(super) enum Checked {
    /// An answer (or not a success, or not checked): passed on.
    Answer(UpstreamResponse),
    /// Not an answer, and why.
    NotAnswer(String),
    /// The deadline passed while its body came.
    Timeout,
}

/// Reads and checks `response`, a model call's buffered success.
pub(super) async fn check(response: UpstreamResponse, deadline: Instant) -> Checked {
    let (parts, body) = response.into_parts();
    let read = crate::ready::by(deadline, axum::body::to_bytes(body, usize::MAX)).await;
    let bytes = match read {
        Err(_) => return Checked::Timeout,
        Ok(Err(e)) => return Checked::NotAnswer(format!("its body was cut: {e}")),
        Ok(Ok(b)) => b,
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match not_an_answer(content_type, &bytes) {
        Some(why) => Checked::NotAnswer(why),
        None => Checked::Answer(axum::http::Response::from_parts(parts, Body::from(bytes))),
    }
}

/// Why `body` (of `content_type`) is not a model's answer, if it is not
/// one: every provider answers a JSON object.
pub(super) fn not_an_answer(content_type: &str, body: &Bytes) -> Option<String> {
    if body.trim_ascii().is_empty() {
        return Some("an empty body".to_owned());
    }
    let object = body.trim_ascii_start().first() == Some(&b'{');
    if object && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() {
        return None;
    }
    let what = if content_type.is_empty() {
        "no content type".to_owned()
    } else {
        content_type.to_owned()
    };
    // The head of it, for the operator: HTML error pages say who sent them.
    let head: String = String::from_utf8_lossy(&body[..body.len().min(80)])
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(format!("not a JSON answer ({what}): {head:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_json_object_is_an_answer() {
        let ok = Bytes::from_static(br#" {"choices": [], "usage": {"prompt_tokens": 1}} "#);
        assert_eq!(not_an_answer("application/json", &ok), None);
        for bad in [
            &b""[..],
            b"  \n",
            b"<html><body>502 Bad Gateway</body></html>",
            br#"{"choices": [{"message": {"content": "cut he"#,
            b"[1, 2]",
            b"null",
        ] {
            let why = not_an_answer("text/html", &Bytes::copy_from_slice(bad));
            assert!(why.is_some(), "{:?}", String::from_utf8_lossy(bad));
        }
        let why = not_an_answer("", &Bytes::from_static(b"<html>")).unwrap();
        assert!(
            why.contains("no content type") && why.contains("<html>"),
            "{why}"
        );
    }
}
