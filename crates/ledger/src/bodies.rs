//! [`Bodies`]: a call's request and response bodies as the request log
//! keeps them — credentials redacted, then cut at a size.
//!
//! What is redacted, wherever it appears in a body:
//! - in JSON (a whole body, or each `data:` line of an SSE stream), the
//!   value of every field whose name is a credential's: `authorization`,
//!   `proxy-authorization`, `cookie`, `set-cookie`, `api_key`/`api-key`/
//!   `apikey`, `x-api-key`, `x-goog-api-key`, `key`, `password`,
//!   `passwd`, `secret`, `client_secret`, `token`, `private_key`,
//!   `credentials`, and any name ending in `_token`, `_secret`,
//!   `_password` or `_api_key` (`max_tokens` and other `_tokens` counts
//!   are kept);
//! - in every text (JSON strings included): a `Bearer …` or `Basic …`
//!   credential, a word that starts `sk-` (OpenAI and Anthropic key
//!   shapes) or `AIza` (Google's), and the value of a `key=`, `api_key=`,
//!   `access_token=` or `token=` URL parameter.
//!
//! Each is replaced by [`REDACTED`]. A body that is not UTF-8 (an audio
//! upload) is kept as a note of its size, never as bytes.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a redacted value reads as.
pub const REDACTED: &str = "[redacted]";

/// A call's bodies, redacted and cut (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Bodies {
    /// The request's body as kept: redacted, at most the cap.
    pub request: String,
    /// The request body's size as the gateway received it, in bytes.
    pub request_bytes: u64,
    /// The response's body as kept (a stream's SSE events as the client
    /// received them), redacted, at most the cap.
    pub response: String,
    /// The response body's size as sent (of a stream: as much as the
    /// gateway saw, which may be more than it kept), in bytes.
    pub response_bytes: u64,
}

impl Bodies {
    /// Bodies of `request` (its whole body) and `response` (the whole
    /// body, or the first bytes of one of `response_bytes` in all), each
    /// redacted, then kept to at most `cap` bytes.
    pub fn capture(request: &[u8], response: &[u8], response_bytes: u64, cap: usize) -> Bodies {
        let response_bytes = response_bytes.max(response.len() as u64);
        Bodies {
            request: kept(request, cap, false),
            request_bytes: request.len() as u64,
            response: kept(response, cap, response_bytes > response.len() as u64),
            response_bytes,
        }
    }

    /// Whether the request was kept whole (not cut at the cap).
    pub fn request_whole(&self) -> bool {
        !self.request.ends_with(CUT)
    }

    /// Whether the response was kept whole (not cut at the cap).
    pub fn response_whole(&self) -> bool {
        !self.response.ends_with(CUT)
    }
}

/// The start of what a body that is not text is kept as.
const BINARY: &str = "[not text: ";

/// What a body cut at the cap ends with.
pub const CUT: &str = "…[truncated]";

/// `body` redacted, then cut to `cap` bytes (on a character's
/// boundary, with [`CUT`] after); `partial`: `body` is the start of a
/// longer one, marked cut whatever its length.
fn kept(body: &[u8], cap: usize, partial: bool) -> String {
    if body.is_empty() {
        return if partial {
            CUT.to_owned()
        } else {
            String::new()
        };
    }
    // A stream's bytes kept up to the cap may end inside a character.
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
            std::str::from_utf8(&body[..e.valid_up_to()]).unwrap_or_default()
        }
        Err(_) => return format!("{BINARY}{} bytes]", body.len()),
    };
    let mut redacted = redact(text);
    if redacted.len() <= cap {
        if partial {
            redacted.push_str(CUT);
        }
        return redacted;
    }
    let mut end = cap;
    while !redacted.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &redacted[..end])
}

/// `text` with its credentials redacted: a JSON document field by
/// field, an SSE stream line by line, other text by its words.
pub fn redact(text: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<Value>(text) {
        redact_value(&mut v);
        return v.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let json = body
            .strip_prefix("data:")
            .map(str::trim_start)
            .and_then(|d| serde_json::from_str::<Value>(d).ok());
        match json {
            Some(mut v) => {
                redact_value(&mut v);
                out.push_str("data: ");
                out.push_str(&v.to_string());
            }
            None => out.push_str(&scrub(body)),
        }
        out.push_str(end);
    }
    out
}

/// Whether a JSON field of this name holds a credential.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    const NAMES: &[&str] = &[
        "authorization",
        "proxy_authorization",
        "cookie",
        "set_cookie",
        "api_key",
        "apikey",
        "x_api_key",
        "x_goog_api_key",
        "key",
        "password",
        "passwd",
        "secret",
        "client_secret",
        "token",
        "private_key",
        "credentials",
    ];
    NAMES.contains(&n.as_str())
        || ["_token", "_secret", "_password", "_api_key"]
            .iter()
            .any(|s| n.ends_with(s))
}

fn redact_value(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (name, value) in map.iter_mut() {
                if secret_name(name) && !value.is_null() {
                    *value = Value::String(REDACTED.to_owned());
                } else {
                    redact_value(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        Value::String(s) => {
            let scrubbed = scrub(s);
            if scrubbed != *s {
                *s = scrubbed;
            }
        }
        _ => {}
    }
}

/// URL parameters whose value is a credential.
const SECRET_PARAMS: &[&str] = &["key=", "api_key=", "apikey=", "access_token=", "token="];

/// `text` with credential-shaped words redacted (see the module doc).
fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // After `Bearer`/`Basic`: the next word is the credential.
    let mut scheme = false;
    while !rest.is_empty() {
        let word_end = rest
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | '<' | '>'))
            .unwrap_or(rest.len());
        let (word, after) = rest.split_at(word_end);
        if word.is_empty() {
            let c = after.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &after[c.len_utf8()..];
            continue;
        }
        if scheme || key_shaped(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(&params_redacted(word));
        }
        scheme = word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic");
        rest = after;
    }
    out
}

/// A word shaped as a provider's key.
fn key_shaped(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_');
    (w.starts_with("sk-") && w.len() >= 20) || (w.starts_with("AIza") && w.len() >= 30)
}

/// `word` with the values of credential URL parameters redacted.
fn params_redacted(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    'outer: while !rest.is_empty() {
        for p in SECRET_PARAMS {
            let at_start = out.is_empty() || out.ends_with(['?', '&', ';']);
            // Bytes, not a slice of `rest`: it may cut a character; a match
            // is ASCII, so `p.len()` is then a boundary.
            let head = rest.as_bytes().get(..p.len());
            if at_start && head.is_some_and(|h| h.eq_ignore_ascii_case(p.as_bytes())) {
                out.push_str(&rest[..p.len()]);
                let end = rest[p.len()..]
                    .find(['&', '#', ';'])
                    .map_or(rest.len(), |i| i + p.len());
                if end > p.len() {
                    out.push_str(REDACTED);
                }
                rest = &rest[end..];
                continue 'outer;
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_json_are_redacted_and_counts_kept() {
        let body = r#"{"model":"m","max_tokens":5,"api_key":"abc","nested":{"Authorization":"Bearer xyz","refresh_token":"r","tokens":3},"messages":[{"content":"my key is sk-abcdefghijklmnopqrstuv ok"}]}"#;
        let out = redact(body);
        assert!(!out.contains("abc\""), "{out}");
        assert!(!out.contains("xyz"), "{out}");
        assert!(!out.contains("sk-abcdefghijklmnopqrstuv"), "{out}");
        assert!(!out.contains("\"r\""), "{out}");
        assert!(out.contains("\"max_tokens\":5"), "{out}");
        assert!(out.contains("\"tokens\":3"), "{out}");
        assert!(out.contains("my key is [redacted] ok"), "{out}");
    }

    #[test]
    fn text_and_streams_are_scrubbed_line_by_line() {
        let sse = "data: {\"token\":\"t1\",\"x\":\"y\"}\n\ndata: [DONE]\n\n";
        let out = redact(sse);
        assert_eq!(
            out,
            "data: {\"token\":\"[redacted]\",\"x\":\"y\"}\n\ndata: [DONE]\n\n"
        );
        let text = "GET https://g.example/v1?alt=sse&key=AIzaSECRET&x=1 with Bearer abc.def";
        let out = redact(text);
        assert_eq!(
            out,
            "GET https://g.example/v1?alt=sse&key=[redacted]&x=1 with Bearer [redacted]"
        );
        // A word that merely contains `key=` is left alone.
        assert_eq!(redact("monkey=1"), "monkey=1");
    }

    #[test]
    fn bodies_are_cut_at_the_cap_on_a_character_and_marked() {
        let b = Bodies::capture("é".repeat(20).as_bytes(), b"ok", 2, 5);
        assert_eq!(b.request, format!("éé{CUT}"));
        assert_eq!(b.request_bytes, 40);
        assert!(!b.request_whole());
        assert_eq!(b.response, "ok");
        assert!(b.response_whole());
        let bin = Bodies::capture(&[0xff, 0xfe, 0x00], b"", 0, 100);
        assert_eq!(bin.request, "[not text: 3 bytes]");
        // A stream kept up to the cap, cut inside a character.
        let cut = Bodies::capture(b"", &"aé".as_bytes()[..2], 9, 100);
        assert_eq!(
            (cut.response.as_str(), cut.response_bytes),
            ("a…[truncated]", 9)
        );
        assert!(!cut.response_whole());
    }
}
