//! A finished trace written straight to its JSON line, on the trace
//! writer's thread: the same bytes `serde_json` writes for its
//! [`TraceRecord`], without building the record's strings and metadata
//! maps first (see the test).

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::{Meta, Trace, TraceRecord, ms};

/// A span metadata value of the gateway's own.
#[derive(Debug, Clone)]
pub(crate) enum Field {
    Static(&'static str),
    Text(String),
    Number(u64),
}

impl From<Field> for Value {
    fn from(f: Field) -> Value {
        match f {
            Field::Static(s) => s.into(),
            Field::Text(s) => s.into(),
            Field::Number(n) => n.into(),
        }
    }
}

/// One trace's line, and what the writer files it under. A trace the
/// gateway ended is queued as it is and written on the writer's thread
/// ([`Line::write`]): the serving thread only reads the clock.
#[derive(Debug)]
pub(crate) enum Line {
    /// The JSON of a record built elsewhere (through the public API).
    Json {
        workspace: String,
        started_unix_ms: u64,
        /// The JSON object, without its newline.
        json: Vec<u8>,
    },
    /// A trace that ended `total` after it started.
    Ended { trace: Box<Trace>, total: Duration },
}

impl Line {
    /// The line of a record built elsewhere (through the public API).
    pub(crate) fn of_record(record: &TraceRecord) -> serde_json::Result<Line> {
        Ok(Line::Json {
            workspace: record.workspace.clone(),
            started_unix_ms: record.started_unix_ms,
            json: serde_json::to_vec(record)?,
        })
    }

    /// The workspace whose file the line goes to.
    pub(crate) fn workspace(&self) -> &str {
        match self {
            Line::Json { workspace, .. } => workspace,
            Line::Ended { trace, .. } => &trace.workspace,
        }
    }

    /// When its trace started, milliseconds since the Unix epoch.
    pub(crate) fn started_unix_ms(&self) -> u64 {
        match self {
            Line::Json {
                started_unix_ms, ..
            } => *started_unix_ms,
            Line::Ended { trace, .. } => trace.started_unix_ms,
        }
    }

    /// Appends the line's JSON object, without its newline, to `j`.
    pub(crate) fn write(&self, j: &mut Vec<u8>) {
        match self {
            Line::Json { json, .. } => j.extend_from_slice(json),
            Line::Ended { trace, total } => trace.write_json(*total, j),
        }
    }
}

impl Trace {
    /// Ends the trace now; its line is written later, by the writer.
    pub(crate) fn ended(self) -> Line {
        let total = self.started.elapsed();
        Line::Ended {
            trace: Box::new(self),
            total,
        }
    }

    /// Appends the JSON of the trace, ended `total` after its start, to
    /// `j`: the bytes `serde_json` writes for its [`TraceRecord`].
    fn write_json(&self, total: Duration, j: &mut Vec<u8>) {
        j.reserve(256 + 160 * self.spans.len());
        j.push(b'{');
        key_value(j, "trace_id", Json::Str(&self.trace_id));
        key_value(j, "request_id", Json::Str(&self.request_id));
        key_value(j, "workspace", Json::Str(&self.workspace));
        key_value(j, "thread", Json::Str(&self.thread));
        key_value(j, "route", Json::Str(&self.route));
        key_value(j, "model", Json::opt(self.model.as_deref()));
        key_value(j, "started_unix_ms", Json::Int(self.started_unix_ms));
        key_value(j, "total_ms", Json::Float(ms(total)));
        key_value(j, "status", Json::Int(self.status.into()));
        key_value(j, "attempts", Json::Int(self.attempts.into()));
        key_value(j, "tool_calls", Json::Int(self.tool_calls.into()));
        j.extend_from_slice(br#""usage":"#);
        write(j, &self.usage);
        j.push(b',');
        key_value(j, "error", Json::opt(self.error.as_deref()));
        j.extend_from_slice(br#""spans":["#);
        for (i, s) in self.spans.iter().enumerate() {
            if i > 0 {
                j.push(b',');
            }
            j.push(b'{');
            let start = ms(s.start.saturating_duration_since(self.started));
            key_value(j, "name", Json::Str(&s.name));
            key_value(j, "start_ms", Json::Float(start));
            let duration = ms(s.end.saturating_duration_since(s.start));
            key_value(j, "duration_ms", Json::Float(duration));
            j.extend_from_slice(br#""metadata":"#);
            match &s.metadata {
                Meta::Map(m) => write(j, m),
                Meta::Fields(fields) => {
                    j.push(b'{');
                    for (i, (k, v)) in fields.iter().enumerate() {
                        if i > 0 {
                            j.push(b',');
                        }
                        Json::Str(k).write(j);
                        j.push(b':');
                        match v {
                            Field::Static(s) => Json::Str(s),
                            Field::Text(s) => Json::Str(s),
                            Field::Number(n) => Json::Int(*n),
                        }
                        .write(j);
                    }
                    j.push(b'}');
                }
            }
            j.push(b'}');
        }
        j.extend_from_slice(b"]}");
    }
}

/// A value of the line.
#[derive(Clone, Copy)]
enum Json<'a> {
    Str(&'a str),
    Null,
    Int(u64),
    Float(f64),
}

impl<'a> Json<'a> {
    fn opt(s: Option<&'a str>) -> Self {
        s.map_or(Json::Null, Json::Str)
    }

    /// As serde_json writes it; a string with nothing to escape (no
    /// quote, backslash or control character: what serde_json escapes)
    /// is copied as it is.
    fn write(self, j: &mut Vec<u8>) {
        match self {
            Json::Str(s) if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') => {
                j.push(b'"');
                j.extend_from_slice(s.as_bytes());
                j.push(b'"');
            }
            Json::Str(s) => write(j, s),
            Json::Null => j.extend_from_slice(b"null"),
            Json::Int(n) => write(j, &n),
            Json::Float(x) => write(j, &x),
        }
    }
}

/// `"key":value,` as serde_json writes them (keys need no escaping).
fn key_value(j: &mut Vec<u8>, key: &str, value: Json<'_>) {
    j.push(b'"');
    j.extend_from_slice(key.as_bytes());
    j.extend_from_slice(b"\":");
    value.write(j);
    j.push(b',');
}

fn write(j: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    // Writing to a Vec fails only for values that are not JSON (a map
    // with non-string keys), which none of these is.
    let _ = serde_json::to_writer(&mut *j, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Usage;
    use tokio::time::Instant;

    // Paused: the record and the line end at the same instant.
    #[tokio::test(start_paused = true)]
    async fn a_line_is_the_records_json_byte_for_byte() {
        let mut t = Trace::start("req \"1\"", "acme", "thread-\u{e9}", "/v1/chat/completions");
        t.model = Some("openai/gpt-4o-mini".into());
        t.status = 200;
        t.attempts = 2;
        t.tool_calls = 1;
        t.error = Some("line\nbreak".into());
        t.usage = Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
            total_tokens: 7,
        });
        let now = Instant::now();
        let mut m = serde_json::Map::new();
        m.insert("zeta".into(), 1.into());
        m.insert("alpha".into(), "a".into());
        t.record_span("custom", now, now, m);
        t.record_fields("auth", now, now, Vec::new());
        t.record_fields(
            "upstream",
            now,
            now,
            vec![
                ("attempt", Field::Number(1)),
                ("outcome", Field::Static("ok")),
                ("status", Field::Number(200)),
                ("upstream", Field::Text("openai".into())),
            ],
        );
        let record = t.clone().finish();
        let line = t.ended();
        let mut json = b"before ".to_vec();
        line.write(&mut json);
        let want = serde_json::to_vec(&record).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&json[7..]),
            String::from_utf8_lossy(&want)
        );
        let back: TraceRecord = serde_json::from_slice(&json[7..]).unwrap();
        assert_eq!(back.spans[2].metadata["upstream"], "openai");
        assert_eq!(line.workspace(), "acme");
        assert_eq!(line.started_unix_ms(), record.started_unix_ms);
    }
}
