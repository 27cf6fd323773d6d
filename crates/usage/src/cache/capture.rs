//! A streamed answer assembled into the whole answer as it passes, so that
//! it can be stored once the stream has ended properly, and never before.

use bytes::Bytes;
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::Endpoint;
use crate::sse::{Event, SseParser};

mod chat;
mod messages;

use chat::ChatAnswer;
use messages::MessageAnswer;

/// Why a captured stream is not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The stream was longer than the cache's largest entry.
    #[error("the stream is longer than {0} bytes")]
    TooLarge(u64),
    /// It stopped before its end marker (`[DONE]`, `message_stop`,
    /// `response.completed`): a disconnect, a timeout, a cancelled call.
    #[error("the stream ended before its end marker")]
    Incomplete,
    /// The provider reported an error inside the stream.
    #[error("the stream carried an error")]
    Failed,
    /// An event was not the JSON its endpoint sends.
    #[error("the stream carried an event that is not {0:?} JSON")]
    Malformed(Endpoint),
    /// The endpoint does not stream (embeddings).
    #[error("the {0:?} endpoint does not stream")]
    NotStreamed(Endpoint),
}

/// Assembles a streamed answer, chunk by chunk, into the JSON answer the
/// same request would have had without `stream` (the form the cache stores
/// and [`super::replay_stream`] replays from). Feed it the upstream's bytes
/// before any usage chunk is stripped, so the stored answer has its usage.
///
/// Memory is bounded by `max_bytes`: past it the capture gives up, drops
/// what it held, and [`StreamCapture::finish`] says
/// [`CaptureError::TooLarge`].
#[derive(Debug)]
pub struct StreamCapture {
    endpoint: Endpoint,
    parser: SseParser,
    max_bytes: u64,
    seen: u64,
    state: Result<Assembly, CaptureError>,
}

#[derive(Debug)]
enum Assembly {
    Chat(ChatAnswer),
    Messages(MessageAnswer),
    Responses(Option<Value>),
}

impl StreamCapture {
    /// A capture of one stream from `endpoint`, giving up past `max_bytes`.
    pub fn new(endpoint: Endpoint, max_bytes: u64) -> Self {
        let state = match endpoint {
            Endpoint::Chat => Ok(Assembly::Chat(ChatAnswer::default())),
            Endpoint::Messages => Ok(Assembly::Messages(MessageAnswer::default())),
            Endpoint::Responses => Ok(Assembly::Responses(None)),
            // Gemini clients' answers are not cached (see the gateway's
            // cache layer).
            // Nor are completions, transcripts, images and moderations.
            Endpoint::Embeddings
            | Endpoint::Generate
            | Endpoint::Completions
            | Endpoint::Transcriptions
            | Endpoint::Images
            | Endpoint::Moderations => Err(CaptureError::NotStreamed(endpoint)),
        };
        let max_event = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        StreamCapture {
            endpoint,
            parser: SseParser::new(max_event),
            max_bytes,
            seen: 0,
            state,
        }
    }

    /// Takes the next chunk of the stream.
    pub fn push(&mut self, mut chunk: &[u8]) {
        if self.state.is_err() {
            return;
        }
        self.seen = self.seen.saturating_add(chunk.len() as u64);
        if self.seen > self.max_bytes {
            self.state = Err(CaptureError::TooLarge(self.max_bytes));
            return;
        }
        while !chunk.is_empty() {
            let (used, event) = self.parser.advance(chunk);
            chunk = &chunk[used..];
            if let Some(event) = event {
                Self::on_event(self.endpoint, self.max_bytes, &mut self.state, event);
            }
        }
    }

    /// Applies one event of the stream to `state`.
    fn on_event(
        endpoint: Endpoint,
        max_bytes: u64,
        state: &mut Result<Assembly, CaptureError>,
        event: Event<'_>,
    ) {
        let Ok(assembly) = &mut *state else {
            return;
        };
        let data = match event {
            Event::Empty => return,
            Event::Oversized => Err(CaptureError::TooLarge(max_bytes)),
            Event::Data(data) => Ok(data),
        };
        let outcome = data.and_then(|data| match assembly {
            Assembly::Chat(chat) if data == b"[DONE]" => {
                chat.done = true;
                Ok(())
            }
            _ => {
                let value: Value =
                    serde_json::from_slice(data).map_err(|_| CaptureError::Malformed(endpoint))?;
                let ok = match assembly {
                    Assembly::Chat(chat) => chat.apply(value),
                    Assembly::Messages(message) => message.apply(value),
                    Assembly::Responses(done) => responses_apply(done, value),
                };
                ok.ok_or(CaptureError::Malformed(endpoint))?
            }
        });
        if let Err(e) = outcome {
            *state = Err(e);
        }
    }

    /// Whether the stream has reached its end marker so far.
    pub fn is_complete(&self) -> bool {
        match &self.state {
            Ok(Assembly::Chat(chat)) => chat.done,
            Ok(Assembly::Messages(message)) => message.stopped,
            Ok(Assembly::Responses(done)) => done.is_some(),
            Err(_) => false,
        }
    }

    /// The whole JSON answer, when the stream ended properly.
    ///
    /// # Errors
    ///
    /// [`CaptureError`] when it did not, or could not be followed.
    pub fn finish(mut self) -> Result<Bytes, CaptureError> {
        // A last event without its blank line counts when it is whole; a
        // cut one makes the stream incomplete rather than malformed.
        if self.state.is_ok()
            && let Some(data) = self.parser.finish()
        {
            let whole = data == b"[DONE]" || serde_json::from_slice::<IgnoredAny>(data).is_ok();
            if whole {
                Self::on_event(
                    self.endpoint,
                    self.max_bytes,
                    &mut self.state,
                    Event::Data(data),
                );
            }
        }
        if self.state.is_ok() && !self.is_complete() {
            return Err(CaptureError::Incomplete);
        }
        let whole = match self.state? {
            Assembly::Chat(chat) => chat.into_answer(),
            Assembly::Messages(message) => message.into_answer(),
            Assembly::Responses(done) => done,
        };
        let whole = whole.ok_or(CaptureError::Malformed(self.endpoint))?;
        Ok(Bytes::from(serde_json::to_vec(&whole).unwrap_or_default()))
    }
}

/// `Some(Err)` for an error event, `Some(Ok)` for the rest, `None` when
/// malformed.
pub(super) type Applied = Option<Result<(), CaptureError>>;

fn responses_apply(done: &mut Option<Value>, mut event: Value) -> Applied {
    match event.get("type")?.as_str()? {
        "response.completed" => *done = Some(event.get_mut("response")?.take()),
        "response.failed" | "response.incomplete" | "error" => {
            return Some(Err(CaptureError::Failed));
        }
        _ => {}
    }
    Some(Ok(()))
}

pub(super) fn append(to: &mut Option<String>, more: Option<&Value>) {
    if let Some(more) = more.and_then(Value::as_str) {
        to.get_or_insert_with(String::new).push_str(more);
    }
}

pub(super) fn push_str(to: &mut String, more: Option<&Value>) {
    if let Some(more) = more.and_then(Value::as_str) {
        to.push_str(more);
    }
}
