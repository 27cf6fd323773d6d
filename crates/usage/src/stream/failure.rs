//! The event that ends a stream the gateway cannot finish (the upstream
//! reset the connection, the deadline passed): an error in the stream's
//! own format, so that SDKs raise it instead of taking a stream that just
//! stops for a whole one.

use bytes::Bytes;

use crate::{Endpoint, WireFormat};

/// The SSE bytes of an error event for a stream of `format` and
/// `endpoint`. They start with a blank line: an event the upstream left
/// unfinished is ended there (clients drop or reject it) rather than
/// swallowing the error into its data.
///
/// - OpenAI chat: `data: {"error": {"message", "type", "code"}}`, what the
///   OpenAI API itself sends mid-stream;
/// - OpenAI `/responses`: `event: error` with `{"type": "error", "code",
///   "message"}`;
/// - Anthropic: `event: error` with `{"type": "error", "error": {"type",
///   "message"}}`;
/// - Gemini: `data: {"error": {"code", "message", "status"}}`, Google's
///   error shape.
pub fn error_event(format: WireFormat, endpoint: Endpoint, code: &str, message: &str) -> Bytes {
    format.dialect().error_event(endpoint, code, message)
}

/// An error event's bytes: a blank line first (see [`error_event`]), then
/// `event: error` where the format names its events, then the data.
pub(crate) fn sse_error(named: bool, data: &serde_json::Value) -> Bytes {
    let text = if named {
        format!("\n\nevent: error\ndata: {data}\n\n")
    } else {
        format!("\n\ndata: {data}\n\n")
    };
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::{Event, SseParser};

    /// The data of the events a client's SSE parser would dispatch.
    fn events(bytes: &[u8]) -> Vec<String> {
        let mut p = SseParser::new(1 << 20);
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let (n, event) = p.advance(&bytes[at..]);
            at += n;
            if let Some(Event::Data(d)) = event {
                out.push(String::from_utf8_lossy(d).into_owned());
            }
        }
        out
    }

    #[test]
    fn each_format_gets_its_own_error_shape() {
        let chat = error_event(WireFormat::Openai, Endpoint::Chat, "c", "m");
        let e: serde_json::Value = serde_json::from_str(&events(&chat)[0]).unwrap();
        assert_eq!(
            (e["error"]["code"].as_str(), e["error"]["message"].as_str()),
            (Some("c"), Some("m"))
        );
        let resp = error_event(WireFormat::Openai, Endpoint::Responses, "c", "m");
        assert!(resp.starts_with(b"\n\nevent: error\n"));
        let msgs = error_event(WireFormat::Anthropic, Endpoint::Messages, "c", "m");
        let e: serde_json::Value = serde_json::from_str(&events(&msgs)[0]).unwrap();
        assert_eq!(e["error"]["type"], "api_error");
        let gemini = error_event(WireFormat::Gemini, Endpoint::Chat, "c", "m");
        let e: serde_json::Value = serde_json::from_str(&events(&gemini)[0]).unwrap();
        assert_eq!(e["error"]["status"], "INTERNAL");
        assert_eq!(e["error"]["message"], "m");
    }
}
