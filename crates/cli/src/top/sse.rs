//! Server-sent events, as the dashboard's stream sends them: `event:`
//! and `data:` lines, an empty line ending each event.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its `event:` name (`message` when none is given).
    pub name: String,
    /// Its `data:` lines, joined by newlines.
    pub data: String,
}

/// Bytes in, whole events out; a partial event waits for the rest.
#[derive(Debug, Default)]
pub struct Parser {
    pending: Vec<u8>,
}

/// The longest event kept waiting for its end: a snapshot is a few
/// kilobytes; anything this long is not the dashboard talking.
const MAX_EVENT: usize = 8 << 20;

impl Parser {
    /// Adds `bytes`; the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = find(&self.pending, b"\n\n") {
            let raw: Vec<u8> = self.pending.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&raw);
            let mut name = String::from("message");
            let mut data: Vec<&str> = Vec::new();
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            if !data.is_empty() {
                out.push(Event {
                    name,
                    data: data.join("\n"),
                });
            }
        }
        if self.pending.len() > MAX_EVENT {
            self.pending.clear();
        }
        out
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_come_out_whole() {
        let mut p = Parser::default();
        assert!(p.push(b"event: history\ndata: {\"a\"").is_empty());
        let evs = p.push(b":1}\n\nevent: snapshot\ndata: {}\n\ndata: x\ndata: y\n\n: comment\n\n");
        assert_eq!(
            evs,
            vec![
                Event {
                    name: "history".into(),
                    data: "{\"a\":1}".into()
                },
                Event {
                    name: "snapshot".into(),
                    data: "{}".into()
                },
                Event {
                    name: "message".into(),
                    data: "x\ny".into()
                },
            ]
        );
        assert!(p.push(b"event: snap").is_empty());
        assert_eq!(p.push(b"shot\ndata: 2\n\n")[0].data, "2");
    }
}
