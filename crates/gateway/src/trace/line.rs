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
    /// `j`: the bytes `serde_json` writes for its [`TraceRecord`]. The
    /// keys are constants with their quotes, colon and comma, numbers go
    /// straight into `j` (`itoa`, and `zmij` as serde_json writes floats),
    /// and only a string with something to escape goes through serde_json.
    fn write_json(&self, total: Duration, j: &mut Vec<u8>) {
        j.reserve(256 + 160 * self.spans.len());
        j.extend_from_slice(br#"{"trace_id":"#);
        string(j, &self.trace_id);
        j.extend_from_slice(br#","request_id":"#);
        string(j, &self.request_id);
        j.extend_from_slice(br#","workspace":"#);
        string(j, &self.workspace);
        j.extend_from_slice(br#","thread":"#);
        string(j, &self.thread);
        j.extend_from_slice(br#","route":"#);
        string(j, &self.route);
        j.extend_from_slice(br#","model":"#);
        optional(j, self.model.as_deref());
        j.extend_from_slice(br#","started_unix_ms":"#);
        int(j, self.started_unix_ms);
        j.extend_from_slice(br#","total_ms":"#);
        float(j, ms(total));
        j.extend_from_slice(br#","status":"#);
        int(j, self.status.into());
        j.extend_from_slice(br#","attempts":"#);
        int(j, self.attempts.into());
        j.extend_from_slice(br#","tool_calls":"#);
        int(j, self.tool_calls.into());
        j.extend_from_slice(br#","usage":"#);
        match &self.usage {
            // `Usage`'s fields in their order, as its `Serialize` writes them.
            Some(u) => {
                j.extend_from_slice(br#"{"prompt_tokens":"#);
                int(j, u.prompt_tokens);
                j.extend_from_slice(br#","completion_tokens":"#);
                int(j, u.completion_tokens);
                j.extend_from_slice(br#","total_tokens":"#);
                int(j, u.total_tokens);
                j.push(b'}');
            }
            None => j.extend_from_slice(b"null"),
        }
        j.extend_from_slice(br#","error":"#);
        optional(j, self.error.as_deref());
        j.extend_from_slice(br#","spans":["#);
        for (i, s) in self.spans.iter().enumerate() {
            if i > 0 {
                j.push(b',');
            }
            j.extend_from_slice(br#"{"name":"#);
            string(j, &s.name);
            j.extend_from_slice(br#","start_ms":"#);
            float(j, ms(s.start.saturating_duration_since(self.started)));
            j.extend_from_slice(br#","duration_ms":"#);
            float(j, ms(s.end.saturating_duration_since(s.start)));
            j.extend_from_slice(br#","metadata":"#);
            match &s.metadata {
                Meta::Map(m) => write(j, m),
                Meta::Fields(fields) => {
                    j.push(b'{');
                    for (i, (k, v)) in fields.iter().enumerate() {
                        if i > 0 {
                            j.push(b',');
                        }
                        string(j, k);
                        j.push(b':');
                        match v {
                            Field::Static(s) => string(j, s),
                            Field::Text(s) => string(j, s),
                            Field::Number(n) => int(j, *n),
                        }
                    }
                    j.push(b'}');
                }
            }
            j.push(b'}');
        }
        j.extend_from_slice(b"]}");
    }
}

/// A string as serde_json writes it: one with nothing to escape (no
/// quote, backslash or control character: what serde_json escapes) is
/// copied as it is.
fn string(j: &mut Vec<u8>, s: &str) {
    if sluice_usage::json_plain_run(s.as_bytes()) < s.len() {
        write(j, s);
    } else {
        j.reserve(s.len() + 2);
        j.push(b'"');
        j.extend_from_slice(s.as_bytes());
        j.push(b'"');
    }
}

fn optional(j: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => string(j, s),
        None => j.extend_from_slice(b"null"),
    }
}

fn int(j: &mut Vec<u8>, n: u64) {
    j.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// As serde_json writes an `f64`: `zmij`'s shortest form, `null` when
/// not finite.
fn float(j: &mut Vec<u8>, x: f64) {
    if let Some(us) = whole_micros(x) {
        // `us / 1000` with its decimals: the shortest form of a value
        // that has at most three, as zmij writes it (`1.0`, `0.25`).
        int(j, us / 1000);
        let (mut frac, mut digits) = (us % 1000, 3);
        while digits > 1 && frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        j.push(b'.');
        if digits == 3 && frac < 100 {
            j.push(b'0');
        }
        if digits >= 2 && frac < 10 {
            j.push(b'0');
        }
        int(j, frac);
    } else if x.is_finite() {
        j.extend_from_slice(zmij::Buffer::new().format_finite(x).as_bytes());
    } else {
        j.extend_from_slice(b"null");
    }
}

/// `x` times 1,000 when that is a whole number below 2^40 (about 35
/// years of microseconds), as [`ms`] makes every duration of the line:
/// so small that no shorter decimal than its three places names the same
/// `f64` (its spacing there is below 10^-6).
fn whole_micros(x: f64) -> Option<u64> {
    const MAX: f64 = (1u64 << 40) as f64;
    let us = (x * 1e3).round();
    // Whole only if dividing back gives `x` exactly: `ms` divides by
    // 1,000 once, and so does this test.
    if x.is_sign_negative() || !(0.0..MAX).contains(&us) || us / 1e3 != x {
        return None;
    }
    // In range and whole: the cast is exact.
    Some(us as u64)
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
        let later = |us| now + std::time::Duration::from_micros(us);
        let mut m = serde_json::Map::new();
        m.insert("zeta".into(), 1.into());
        m.insert("alpha".into(), "a".into());
        t.record_span("custom", now, now, m);
        t.record_fields("auth", later(1), later(999_999), Vec::new());
        t.record_fields(
            "upstream",
            later(1_234),
            later(86_400_000_001),
            vec![
                ("attempt", Field::Number(1)),
                ("outcome", Field::Static("ok")),
                ("status", Field::Number(200)),
                ("upstream", Field::Text("openai".into())),
            ],
        );
        tokio::time::advance(std::time::Duration::from_micros(86_400_123_457)).await;
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

    proptest::proptest! {
        // Numbers as serde_json writes them: the line's floats are
        // milliseconds with three decimals, any finite or not.
        #[test]
        fn numbers_are_serde_jsons(n: u64, x: f64, us in 0u64..10_000_000_000_000) {
            let mut j = Vec::new();
            int(&mut j, n);
            proptest::prop_assert_eq!(&j, &serde_json::to_vec(&n).unwrap());
            let edges = [0.0, -0.0, 0.001, 0.01, 0.1, 0.5, 1.0, 1.05, 9.999, 10.0, 100.25, 1e9, 1_099_511_627.775, 1_099_511_627.776, 1e12];
            for x in edges.into_iter().chain([x, ms(std::time::Duration::from_micros(us)), f64::NAN, f64::INFINITY]) {
                let mut j = Vec::new();
                float(&mut j, x);
                proptest::prop_assert_eq!(&j, &serde_json::to_vec(&x).unwrap());
            }
        }

        #[test]
        fn strings_are_serde_jsons(s in "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é€😀/ ]{0,40}") {
            let mut j = Vec::new();
            string(&mut j, &s);
            proptest::prop_assert_eq!(&j, &serde_json::to_vec(&s).unwrap());
        }
    }
}
