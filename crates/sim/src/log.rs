//! A bounded log of every request the sim answered, read page by page
//! with `GET /_sim/log?since=N`, so that tests can check that an effect
//! (say a durable job's call) happened at least once.

use std::collections::VecDeque;

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

/// Longest header value kept; longer ones are cut (on a char boundary).
const MAX_KEY_LEN: usize = 256;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Position in the log, from 1; never reused, even across resets.
    pub seq: u64,
    /// Milliseconds since the sim started.
    pub at_ms: u64,
    /// HTTP method.
    pub method: String,
    /// Path, without the query.
    pub path: String,
    /// The model or API the request named, once known.
    pub target: Option<String>,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<String>,
    /// The `x-request-id` header, if any (cut like the key).
    #[serde(default)]
    pub request_id: Option<String>,
    /// The `traceparent` header (W3C Trace Context), if any.
    #[serde(default)]
    pub traceparent: Option<String>,
    /// The `tracestate` header, if any.
    #[serde(default)]
    pub tracestate: Option<String>,
    /// The status answered.
    pub status: u16,
    /// The fault injected, if any: `error`, `disconnect`,
    /// `malformed` or `hang`.
    pub fault: Option<String>,
}

/// A page of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPage {
    /// Entries with `seq` above the `since` asked for, oldest first.
    pub entries: Vec<LogEntry>,
    /// The last `seq` written so far: pass it as the next `since`.
    pub next: u64,
    /// Whether entries after `since` were already dropped to bound the
    /// log.
    pub truncated: bool,
}

#[derive(Debug)]
pub(crate) struct Log {
    entries: VecDeque<LogEntry>,
    capacity: usize,
    last_seq: u64,
    /// Highest `seq` dropped, by eviction or reset.
    dropped_to: u64,
}

/// The parts of an entry the caller knows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Line {
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub request_id: Option<String>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

/// `name`'s value in `headers`, cut to [`MAX_KEY_LEN`] on a char boundary.
fn kept(headers: &HeaderMap, name: &str) -> Option<String> {
    // UTF-8 rather than visible ASCII: a test may send any bytes.
    let v = std::str::from_utf8(headers.get(name)?.as_bytes()).ok()?;
    let mut end = v.len().min(MAX_KEY_LEN);
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    Some(v[..end].to_owned())
}

impl Line {
    /// The line of a request with `headers`: the ones tests check for
    /// (idempotency key, request id, trace context) are kept.
    pub(crate) fn new(method: &str, path: &str, headers: &HeaderMap) -> Self {
        Line {
            method: method.to_owned(),
            path: path.to_owned(),
            idempotency_key: kept(headers, "idempotency-key"),
            request_id: kept(headers, "x-request-id"),
            traceparent: kept(headers, "traceparent"),
            tracestate: kept(headers, "tracestate"),
        }
    }
}

impl Log {
    pub(crate) fn new(capacity: usize) -> Self {
        Log {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            last_seq: 0,
            dropped_to: 0,
        }
    }

    /// Appends an entry and returns its `seq`.
    pub(crate) fn push(
        &mut self,
        line: Line,
        at_ms: u64,
        target: Option<&str>,
        status: u16,
        fault: Option<&str>,
    ) -> u64 {
        self.last_seq += 1;
        if self.entries.len() >= self.capacity
            && let Some(old) = self.entries.pop_front()
        {
            self.dropped_to = old.seq;
        }
        self.entries.push_back(LogEntry {
            seq: self.last_seq,
            at_ms,
            method: line.method,
            path: line.path,
            target: target.map(str::to_owned),
            idempotency_key: line.idempotency_key,
            request_id: line.request_id,
            traceparent: line.traceparent,
            tracestate: line.tracestate,
            status,
            fault: fault.map(str::to_owned),
        });
        self.last_seq
    }

    /// Entries after `since`.
    pub(crate) fn page(&self, since: u64) -> LogPage {
        // Entries are in seq order; skip those at or before `since`.
        let start = self.entries.partition_point(|e| e.seq <= since);
        LogPage {
            entries: self.entries.range(start..).cloned().collect(),
            next: self.last_seq,
            truncated: since < self.dropped_to,
        }
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.dropped_to = self.last_seq;
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn push(log: &mut Log, n: u64) {
        for i in 0..n {
            let line = Line::new("POST", "/x", &headers(&[("idempotency-key", "k")]));
            log.push(line, i, None, 200, None);
        }
    }

    #[test]
    fn pages_and_bounds() {
        let mut log = Log::new(3);
        push(&mut log, 5);
        let page = log.page(0);
        assert_eq!(
            page.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
            [3, 4, 5]
        );
        assert!(page.truncated);
        let page = log.page(4);
        assert_eq!(
            (page.entries.len(), page.next, page.truncated),
            (1, 5, false)
        );
        log.clear();
        assert!(log.page(5).entries.is_empty());
        push(&mut log, 1);
        assert_eq!(log.page(5).entries[0].seq, 6);
    }

    #[test]
    fn long_keys_are_cut_on_char_boundaries() {
        let key = "é".repeat(300);
        let mut h = HeaderMap::new();
        h.insert(
            "idempotency-key",
            HeaderValue::from_bytes(key.as_bytes()).unwrap(),
        );
        let line = Line::new("GET", "/", &h);
        let kept = line.idempotency_key.unwrap();
        assert!(kept.len() <= MAX_KEY_LEN && key.starts_with(&kept));
    }

    #[test]
    fn request_id_and_trace_context_are_kept() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let h = headers(&[
            ("x-request-id", "req-1"),
            ("traceparent", tp),
            ("tracestate", "congo=t61rcWkgMzE"),
        ]);
        let line = Line::new("POST", "/v1/chat/completions", &h);
        assert_eq!(line.request_id.as_deref(), Some("req-1"));
        assert_eq!(line.traceparent.as_deref(), Some(tp));
        assert_eq!(line.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        assert_eq!(line.idempotency_key, None);
        let empty = Line::new("GET", "/", &HeaderMap::new());
        assert_eq!((empty.request_id, empty.traceparent), (None, None));
    }
}
