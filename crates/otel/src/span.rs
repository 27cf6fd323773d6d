//! A finished span as the exporter takes it: ids, name, kind, times in
//! nanoseconds since the Unix epoch, attributes and status. Built by the
//! caller (the gateway builds one per step of a request), never by a
//! tracing subscriber: what is not sampled costs nothing.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// A W3C trace id.
pub type TraceId = [u8; 16];

/// A W3C span id.
pub type SpanId = [u8; 8];

/// What a span stands for, as OTLP names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A step inside the process (a queue wait, a cache lookup).
    Internal,
    /// The handling of a request a client sent.
    Server,
    /// A call to another service (a model call, one HTTP attempt).
    Client,
    /// Work handed to a queue.
    Producer,
    /// Work taken from a queue (a job attempt).
    Consumer,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    Str(Cow<'static, str>),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// A list of strings (e.g. `gen_ai.response.finish_reasons`).
    Strs(Vec<String>),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Value {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(Cow::Owned(s))
    }
}

impl From<Cow<'static, str>> for Value {
    fn from(s: Cow<'static, str>) -> Value {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Int(i64::from(n))
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Value {
        Value::Int(i64::from(n))
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Value {
        Value::Double(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<Vec<String>> for Value {
    fn from(v: Vec<String>) -> Value {
        Value::Strs(v)
    }
}

/// How a span ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Status {
    /// Nothing to say (the OTLP default: a success).
    #[default]
    Unset,
    /// Failed, and why.
    Error(String),
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The trace it belongs to.
    pub trace_id: TraceId,
    /// Its own id.
    pub span_id: SpanId,
    /// Its parent's id; `None` for a trace's root.
    pub parent: Option<SpanId>,
    /// Whether the parent is another process's span (a client's
    /// `traceparent`).
    pub remote_parent: bool,
    /// Its name, e.g. `POST /v1/chat/completions`, `chat gpt-4o-mini`.
    pub name: Cow<'static, str>,
    /// Its kind.
    pub kind: Kind,
    /// Start, nanoseconds since the Unix epoch.
    pub start_unix_nanos: u64,
    /// End, nanoseconds since the Unix epoch.
    pub end_unix_nanos: u64,
    /// Attributes, by their semantic-convention names.
    pub attributes: Vec<(&'static str, Value)>,
    /// How it ended.
    pub status: Status,
}

impl Span {
    /// A span of `trace_id` with a new random id, no attributes, from
    /// `start` to `end` (nanoseconds since the Unix epoch).
    pub fn new(
        trace_id: TraceId,
        parent: Option<SpanId>,
        name: impl Into<Cow<'static, str>>,
        kind: Kind,
        start_unix_nanos: u64,
        end_unix_nanos: u64,
    ) -> Span {
        Span {
            trace_id,
            span_id: new_span_id(),
            parent,
            remote_parent: false,
            name: name.into(),
            kind,
            start_unix_nanos,
            end_unix_nanos,
            attributes: Vec::new(),
            status: Status::Unset,
        }
    }

    /// Adds an attribute.
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) -> &mut Span {
        self.attributes.push((key, value.into()));
        self
    }

    /// The value of `key`, when set (the last one set wins).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

/// A random span id, never all zeros.
pub fn new_span_id() -> SpanId {
    fastrand::u64(1..).to_be_bytes()
}

/// Maps the monotonic clock onto wall-clock nanoseconds from one reading
/// of each, so that a request's spans keep their exact durations and
/// order even if the wall clock jumps while it runs.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    at: Instant,
    unix_nanos: u64,
}

impl Clock {
    /// Reads both clocks now.
    pub fn now() -> Clock {
        Clock::at(Instant::now())
    }

    /// Both clocks at `at`, a moment just past.
    pub fn at(at: Instant) -> Clock {
        let now = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let back = u64::try_from(now.saturating_duration_since(at).as_nanos()).unwrap_or(0);
        Clock {
            at,
            unix_nanos: unix.saturating_sub(back),
        }
    }

    /// `t` in nanoseconds since the Unix epoch.
    pub fn unix_nanos(&self, t: Instant) -> u64 {
        if t >= self.at {
            let d = u64::try_from((t - self.at).as_nanos()).unwrap_or(u64::MAX);
            self.unix_nanos.saturating_add(d)
        } else {
            let d = u64::try_from((self.at - t).as_nanos()).unwrap_or(u64::MAX);
            self.unix_nanos.saturating_sub(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_keeps_durations_exact() {
        let start = Instant::now();
        let clock = Clock::at(start);
        tokio::time::advance(Duration::from_micros(1_500)).await;
        let later = Instant::now();
        assert_eq!(clock.unix_nanos(later) - clock.unix_nanos(start), 1_500_000);
        assert!(clock.unix_nanos(start) > 1_600_000_000_000_000_000);
    }

    #[test]
    fn the_last_value_set_wins() {
        let mut s = Span::new([1; 16], None, "x", Kind::Internal, 1, 2);
        s.set("a", 1u32).set("a", "two");
        assert_eq!(s.get("a"), Some(&Value::from("two")));
        assert_eq!(s.get("b"), None);
        assert_ne!(s.span_id, [0; 8]);
    }
}
