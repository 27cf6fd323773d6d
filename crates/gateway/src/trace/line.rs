//! A finished trace written straight to its JSON line: the same bytes
//! `serde_json` writes for its [`TraceRecord`], without building the
//! record's strings and metadata maps first (see the test).

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

/// One trace's line, and what the writer files it under.
#[derive(Debug)]
pub(crate) struct Line {
    pub workspace: String,
    pub started_unix_ms: u64,
    /// The JSON object, without its newline.
    pub json: Vec<u8>,
}

impl Line {
    /// The line of a record built elsewhere (through the public API).
    pub(crate) fn of_record(record: &TraceRecord) -> serde_json::Result<Line> {
        Ok(Line {
            workspace: record.workspace.clone(),
            started_unix_ms: record.started_unix_ms,
            json: serde_json::to_vec(record)?,
        })
    }
}

impl Trace {
    /// Ends the trace now and writes its line.
    pub(crate) fn finish_line(self) -> Line {
        let total = self.started.elapsed();
        let mut j = Vec::with_capacity(256 + 160 * self.spans.len());
        j.push(b'{');
        key_value(&mut j, "trace_id", Json::Str(&self.trace_id));
        key_value(&mut j, "request_id", Json::Str(&self.request_id));
        key_value(&mut j, "workspace", Json::Str(&self.workspace));
        key_value(&mut j, "thread", Json::Str(&self.thread));
        key_value(&mut j, "route", Json::Str(&self.route));
        key_value(&mut j, "model", Json::opt(self.model.as_deref()));
        key_value(&mut j, "started_unix_ms", Json::Int(self.started_unix_ms));
        key_value(&mut j, "total_ms", Json::Float(ms(total)));
        key_value(&mut j, "status", Json::Int(self.status.into()));
        key_value(&mut j, "attempts", Json::Int(self.attempts.into()));
        key_value(&mut j, "tool_calls", Json::Int(self.tool_calls.into()));
        j.extend_from_slice(br#""usage":"#);
        write(&mut j, &self.usage);
        j.push(b',');
        key_value(&mut j, "error", Json::opt(self.error.as_deref()));
        j.extend_from_slice(br#""spans":["#);
        for (i, s) in self.spans.iter().enumerate() {
            if i > 0 {
                j.push(b',');
            }
            j.push(b'{');
            let start = ms(s.start.saturating_duration_since(self.started));
            key_value(&mut j, "name", Json::Str(&s.name));
            key_value(&mut j, "start_ms", Json::Float(start));
            let duration = ms(s.end.saturating_duration_since(s.start));
            key_value(&mut j, "duration_ms", Json::Float(duration));
            j.extend_from_slice(br#""metadata":"#);
            match &s.metadata {
                Meta::Map(m) => write(&mut j, m),
                Meta::Fields(fields) => {
                    j.push(b'{');
                    for (i, (k, v)) in fields.iter().enumerate() {
                        if i > 0 {
                            j.push(b',');
                        }
                        Json::Str(k).write(&mut j);
                        j.push(b':');
                        match v {
                            Field::Static(s) => Json::Str(s),
                            Field::Text(s) => Json::Str(s),
                            Field::Number(n) => Json::Int(*n),
                        }
                        .write(&mut j);
                    }
                    j.push(b'}');
                }
            }
            j.push(b'}');
        }
        j.extend_from_slice(b"]}");
        Line {
            workspace: self.workspace,
            started_unix_ms: self.started_unix_ms,
            json: j,
        }
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
        let line = t.finish_line();
        let want = serde_json::to_vec(&record).unwrap();
        assert_eq!(
            String::from_utf8(line.json.clone()),
            String::from_utf8(want)
        );
        let back: TraceRecord = serde_json::from_slice(&line.json).unwrap();
        assert_eq!(back.spans[2].metadata["upstream"], "openai");
        assert_eq!(line.workspace, "acme");
    }
}
