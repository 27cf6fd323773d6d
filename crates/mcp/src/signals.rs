//! What a tool's result says about the API behind it: a result marked as
//! an error that carries a 429 (in its structured content's `status`, or
//! its text: `429`, "rate limit", "too many requests") is that API
//! refusing for its rate, and its `retry_after_ms` / `retry_after`
//! (seconds) or a "retry after N ms|s" in the text says for how long.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

/// A rate-limit refusal read from a tool's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimited {
    /// How long the API asked to wait, when it said.
    pub retry_after: Option<Duration>,
}

/// Longest wait a result may ask for (an hour): more is a bad value.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3_600);

/// The rate-limit refusal `result` carries, if it is one.
pub fn rate_limit_of(result: &CallToolResult) -> Option<RateLimited> {
    if result.is_error != Some(true) {
        return None;
    }
    let structured = result.structured_content.as_ref();
    let status_429 = structured
        .and_then(|v| v.get("status"))
        .and_then(Value::as_u64)
        == Some(429);
    let text: String = result
        .content
        .iter()
        .filter_map(|c| match c {
            ContentBlock::Text(t) => Some(t.text.to_ascii_lowercase()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    let said = text.contains("429")
        || text.contains("rate limit")
        || text.contains("rate-limit")
        || text.contains("too many requests");
    if !status_429 && !said {
        return None;
    }
    let from_structured = structured.and_then(|v| {
        v.get("retry_after_ms")
            .and_then(Value::as_u64)
            .map(Duration::from_millis)
            .or_else(|| {
                v.get("retry_after")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER.as_secs_f64())))
            })
    });
    let retry_after = from_structured
        .or_else(|| from_text(&text))
        .map(|d| d.min(MAX_RETRY_AFTER));
    Some(RateLimited { retry_after })
}

/// "retry after 1500 ms", "retry after 2 s", "retry after 2 seconds".
fn from_text(text: &str) -> Option<Duration> {
    let rest = &text[text.find("retry after")? + "retry after".len()..];
    let rest = rest.trim_start();
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let n: f64 = digits.parse().ok().filter(|n: &f64| n.is_finite())?;
    let unit = rest[digits.len()..].trim_start();
    if unit.starts_with("ms") || unit.starts_with("millisecond") {
        Some(Duration::from_secs_f64((n / 1000.0).min(3_600.0)))
    } else if unit.starts_with('s') {
        Some(Duration::from_secs_f64(n.min(3_600.0)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(text: &str, structured: Option<Value>) -> CallToolResult {
        let mut r = CallToolResult::error(vec![ContentBlock::text(text)]);
        r.structured_content = structured;
        r
    }

    #[test]
    fn rate_limits_are_read_from_status_and_text() {
        let r = error("x", Some(json!({"status": 429, "retry_after_ms": 1500})));
        assert_eq!(
            rate_limit_of(&r).unwrap().retry_after,
            Some(Duration::from_millis(1500))
        );
        let r = error("Rate limit exceeded, retry after 2 s", None);
        assert_eq!(
            rate_limit_of(&r).unwrap().retry_after,
            Some(Duration::from_secs(2))
        );
        let r = error("HTTP 429 Too Many Requests", None);
        assert_eq!(rate_limit_of(&r), Some(RateLimited { retry_after: None }));
        assert_eq!(rate_limit_of(&error("not found", None)), None);
        let ok = CallToolResult::success(vec![ContentBlock::text("429 emails sent")]);
        assert_eq!(rate_limit_of(&ok), None);
    }
}
