//! An OpenAI chat answer as the client formats' writers read it: a
//! stream chunk's id and model, each choice's text and tool-call pieces
//! and finish reason, or the provider's error ([`read`]); a whole
//! completion's first choice ([`completion`]). Read typed, borrowing the
//! strings from the answer's bytes, in one pass that builds no tree; what
//! the typed reading does not take (an `error`, a field of another type
//! than the writers read, a repeated key) is read as a `Value` tree,
//! leniently, as the writers read every answer before: a field of another
//! type is then absent. Both readings give the writers the same
//! [`Chunk`] or [`Completion`]. A stream chunk is first walked with the
//! stream scanner's cursor (`lean.rs`), which reads the common chunk in
//! a few instructions a byte and leaves any other to the typed reading.

mod lean;

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, Visitor};
use serde_json::Value;

/// What a writer reads in one event's data.
pub(in crate::providers::front) enum Read<'a> {
    /// The provider's error, as it came (its `message`, `code`, …).
    Error(Value),
    /// A chunk.
    Chunk(Chunk<'a>),
}

/// Reads one event's data; `None` when it is not JSON (the writers skip
/// it).
pub(in crate::providers::front) fn read(data: &[u8]) -> Option<Read<'_>> {
    if let Some(chunk) = lean::chunk(data) {
        return Some(Read::Chunk(chunk));
    }
    if let Ok(chunk) = serde_json::from_slice::<Typed<'_>>(data)
        && !chunk.error.0
    {
        return Some(Read::Chunk(Chunk {
            id: chunk.id.map(|t| t.0),
            model: chunk.model.map(|t| t.0),
            choices: chunk.choices.unwrap_or_default(),
        }));
    }
    let value = serde_json::from_slice::<Value>(data).ok()?;
    if let Some(error) = value.get("error") {
        return Some(Read::Error(error.clone()));
    }
    Some(Read::Chunk(Chunk::lenient(&value)))
}

/// A chat chunk (see the module doc).
#[derive(Debug, Default, PartialEq)]
pub(in crate::providers::front) struct Chunk<'a> {
    pub id: Option<Cow<'a, str>>,
    pub model: Option<Cow<'a, str>>,
    /// Its `choices`; none when it has no array of them.
    pub choices: Vec<Choice<'a>>,
}

/// One element of `choices`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Choice<'a> {
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Option<Text<'a>>,
}

/// A choice's `delta`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Delta<'a> {
    #[serde(borrow, default)]
    pub content: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<ToolCall<'a>>>,
}

/// One piece of a tool call.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct ToolCall<'a> {
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub id: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub function: Option<Function<'a>>,
}

/// A tool-call piece's `function`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Function<'a> {
    #[serde(borrow, default)]
    pub name: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub arguments: Option<Text<'a>>,
}

impl<'a> Choice<'a> {
    /// The delta's text, unless empty.
    pub fn text(&self) -> Option<&str> {
        self.delta
            .as_ref()?
            .content
            .as_deref()
            .filter(|t| !t.is_empty())
    }

    /// The delta's tool-call pieces.
    pub fn tool_calls(&self) -> &[ToolCall<'a>] {
        self.delta
            .as_ref()
            .and_then(|d| d.tool_calls.as_deref())
            .unwrap_or_default()
    }

    /// The finish reason, once set.
    pub fn finish(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }
}

impl ToolCall<'_> {
    /// The call's name, in the piece that starts it.
    pub fn name(&self) -> Option<&str> {
        self.function.as_ref()?.name.as_deref()
    }

    /// A piece of the call's arguments.
    pub fn arguments(&self) -> Option<&str> {
        self.function.as_ref()?.arguments.as_deref()
    }
}

/// A string, borrowed from the event's bytes unless it had escapes.
#[derive(Debug, Default, PartialEq)]
pub(in crate::providers::front) struct Text<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

/// Whether a key was present, whatever its value (`null` included): a
/// chunk with an `error` key is the provider's error.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

/// The typed reading: a field of another type, or one given twice, fails
/// it (then the lenient reading decides).
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow, default)]
    id: Option<Text<'a>>,
    #[serde(borrow, default)]
    model: Option<Text<'a>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    error: Present,
}

/// `v`, if it is an object.
fn object(v: &Value) -> Option<&Value> {
    Some(v).filter(|v| v.is_object())
}

/// `v`'s string, if it is one.
fn text(v: &Value) -> Option<Text<'static>> {
    v.as_str().map(|s| Text(Cow::Owned(s.to_owned())))
}

impl Chunk<'static> {
    /// The chunk as the writers read a `Value`: each field that is not of
    /// its type is absent.
    fn lenient(v: &Value) -> Self {
        let choices = v["choices"].as_array().map(|choices| {
            choices
                .iter()
                .map(|c| Choice {
                    index: c["index"].as_u64(),
                    delta: object(&c["delta"]).map(|d| Delta {
                        content: text(&d["content"]),
                        tool_calls: d["tool_calls"].as_array().map(|calls| {
                            calls
                                .iter()
                                .map(|t| ToolCall {
                                    index: t["index"].as_u64(),
                                    id: text(&t["id"]),
                                    function: object(&t["function"]).map(|f| Function {
                                        name: text(&f["name"]),
                                        arguments: text(&f["arguments"]),
                                    }),
                                })
                                .collect()
                        }),
                    }),
                    finish_reason: text(&c["finish_reason"]),
                })
                .collect()
        });
        Chunk {
            id: v["id"].as_str().map(|s| Cow::Owned(s.to_owned())),
            model: v["model"].as_str().map(|s| Cow::Owned(s.to_owned())),
            choices: choices.unwrap_or_default(),
        }
    }
}

/// A whole chat completion, as a writer reads it.
#[derive(Debug, Default, PartialEq)]
pub(in crate::providers::front) struct Completion<'a> {
    pub id: Option<Text<'a>>,
    pub model: Option<Text<'a>>,
    /// Its first choice (a translated call asks for one).
    pub choice: Option<Answered<'a>>,
}

/// A completion's choice.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Answered<'a> {
    #[serde(borrow, default)]
    pub message: Option<Message<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Option<Text<'a>>,
}

/// A choice's `message`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Message<'a> {
    #[serde(borrow, default)]
    pub content: Option<Text<'a>>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<Call<'a>>>,
}

/// A tool call of a message: its `id` and `name` as they came, whatever
/// their type (a writer passes them on).
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct Call<'a> {
    #[serde(default)]
    pub id: Value,
    #[serde(borrow, default)]
    pub function: Option<CallFunction<'a>>,
}

/// A tool call's `function`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub(in crate::providers::front) struct CallFunction<'a> {
    #[serde(default)]
    pub name: Value,
    #[serde(borrow, default)]
    pub arguments: Option<Text<'a>>,
}

/// Reads a whole (successful) completion; an answer that is not one
/// reads as one with nothing set.
pub(in crate::providers::front) fn completion(body: &[u8]) -> Completion<'_> {
    #[derive(Deserialize)]
    struct Typed<'a> {
        #[serde(borrow, default)]
        id: Option<Text<'a>>,
        #[serde(borrow, default)]
        model: Option<Text<'a>>,
        #[serde(borrow, default)]
        choices: Option<Vec<Answered<'a>>>,
    }
    if let Some(read) = lean::completion(body) {
        return read;
    }
    if let Ok(t) = serde_json::from_slice::<Typed<'_>>(body) {
        return Completion {
            id: t.id,
            model: t.model,
            choice: t.choices.and_then(|c| c.into_iter().next()),
        };
    }
    let v = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    Completion::lenient(&v)
}

impl Completion<'static> {
    /// The completion as the writers read a `Value`: each field that is
    /// not of its type is absent.
    fn lenient(v: &Value) -> Self {
        let choice = object(&v["choices"][0]).map(|c| Answered {
            message: object(&c["message"]).map(|m| Message {
                content: text(&m["content"]),
                tool_calls: m["tool_calls"].as_array().map(|calls| {
                    calls
                        .iter()
                        .map(|t| Call {
                            id: t["id"].clone(),
                            function: object(&t["function"]).map(|f| CallFunction {
                                name: f["name"].clone(),
                                arguments: text(&f["arguments"]),
                            }),
                        })
                        .collect()
                }),
            }),
            finish_reason: text(&c["finish_reason"]),
        });
        Completion {
            id: text(&v["id"]),
            model: text(&v["model"]),
            choice,
        }
    }
}

impl<'a> Answered<'a> {
    /// The message's text, unless empty.
    pub fn text(&self) -> Option<&str> {
        self.message
            .as_ref()?
            .content
            .as_deref()
            .filter(|t| !t.is_empty())
    }

    /// The message's tool calls.
    pub fn tool_calls(&self) -> &[Call<'a>] {
        self.message
            .as_ref()
            .and_then(|m| m.tool_calls.as_deref())
            .unwrap_or_default()
    }
}

impl Call<'_> {
    /// The call's arguments, `{}` when it has none.
    pub fn arguments(&self) -> &str {
        self.function
            .as_ref()
            .and_then(|f| f.arguments.as_deref())
            .unwrap_or("{}")
    }

    /// The call's name, as it came.
    pub fn name(&self) -> &Value {
        self.function.as_ref().map_or(&Value::Null, |f| &f.name)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What a writer reads of `data`, owned.
    fn reading(data: &[u8]) -> Option<String> {
        Some(match read(data)? {
            Read::Error(e) => format!("error {e}"),
            Read::Chunk(c) => format!("{c:?}"),
        })
    }

    /// What the lenient reading alone reads of `data`.
    fn lenient(data: &[u8]) -> Option<String> {
        let value = serde_json::from_slice::<Value>(data).ok()?;
        Some(match value.get("error") {
            Some(e) => format!("error {e}"),
            None => format!("{:?}", Chunk::lenient(&value)),
        })
    }

    #[test]
    fn the_typed_reading_is_the_lenient_one() {
        let cases = [
            json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "h\u{e9}\n\"x\""},
                "logprobs": null, "finish_reason": null}], "usage": null}),
            json!({"id": "c1", "choices": [], "usage": {"prompt_tokens": 1}}),
            json!({"choices": [{"index": 1, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}},
                {"index": 1, "function": {"arguments": "{\"a\":1}"}}]}, "finish_reason": "tool_calls"}]}),
            json!({"choices": null, "id": null, "model": null}),
            json!({"choices": [{"delta": null, "finish_reason": "stop"}]}),
            // Of another type: absent.
            json!({"id": 5, "choices": [{"index": -1, "delta": {"content": 7}}]}),
            json!({"choices": {"0": {}}}),
            json!({"choices": [null, 3]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 1.5, "function": "f"}]}}]}),
            json!({"error": {"message": "boom", "code": "e"}}),
            json!({"error": null, "choices": []}),
            json!([1, 2]),
        ];
        for case in &cases {
            let data = case.to_string();
            assert_eq!(reading(data.as_bytes()), lenient(data.as_bytes()), "{data}");
            // The cursor reads what the others read, or leaves it to them.
            if let Some(chunk) = lean::chunk(data.as_bytes()) {
                assert_eq!(
                    Some(format!("{chunk:?}")),
                    lenient(data.as_bytes()),
                    "{data}"
                );
            }
        }
        // The common chunks are the cursor's (a string with escapes is
        // not).
        for case in [&cases[1], &cases[3], &cases[4]] {
            assert!(lean::chunk(case.to_string().as_bytes()).is_some(), "{case}");
        }
        assert!(lean::chunk(cases[0].to_string().as_bytes()).is_none());
        let sim = br#"{"choices":[{"delta":{"content":" while"},"finish_reason":null,"index":0,"logprobs":null}],"created":1795974162,"id":"chatcmpl-sim1","model":"gpt-4o-mini","object":"chat.completion.chunk","usage":null}"#;
        assert!(lean::chunk(sim).is_some());
        // A repeated key: the last one, as a tree keeps it.
        let data = br#"{"id":"a","id":"b","choices":[]}"#;
        assert_eq!(reading(data), lenient(data));
        assert!(reading(data).unwrap().contains("\"b\""));
        assert_eq!(reading(b"{\"id\":"), None);
        assert_eq!(reading(b"[DONE]"), None);
    }

    #[test]
    fn a_typed_completion_is_the_lenient_one() {
        let cases = [
            json!({"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "h\u{e9}\n", "refusal": null},
                "logprobs": null, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1}}),
            json!({"choices": [{"message": {"content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"id": 7, "function": {"name": null}}]}, "finish_reason": "tool_calls"}, {"x": 1}]}),
            json!({"choices": []}),
            json!({"choices": null, "id": null}),
            // Of another type: absent.
            json!({"id": 5, "model": [], "choices": [{"message": {"content": 7}, "finish_reason": 1}]}),
            json!({"choices": [null]}),
            json!({"choices": [{"message": {"tool_calls": [{"function": {"arguments": {}}}]}}]}),
            json!([1]),
            json!("text"),
        ];
        for case in &cases {
            let data = case.to_string();
            assert_eq!(
                format!("{:?}", completion(data.as_bytes())),
                format!("{:?}", Completion::lenient(case)),
                "{data}"
            );
        }
        for case in &cases {
            // The cursor reads what the others read, or leaves it to them.
            if let Some(read) = lean::completion(case.to_string().as_bytes()) {
                assert_eq!(
                    format!("{read:?}"),
                    format!("{:?}", Completion::lenient(case))
                );
            }
        }
        assert!(lean::completion(cases[2].to_string().as_bytes()).is_some());
        let sim = br#"{"choices":[{"finish_reason":"length","index":0,"logprobs":null,"message":{"content":"pace while agents","refusal":null,"role":"assistant"}}],"created":1795974162,"id":"chatcmpl-sim1","model":"gpt-4o-mini","object":"chat.completion","usage":{"completion_tokens":16,"prompt_tokens":4,"total_tokens":20}}"#;
        let read = lean::completion(sim).unwrap();
        assert_eq!(read.choice.unwrap().text(), Some("pace while agents"));
        assert_eq!(completion(b"not json"), Completion::default());
        // A repeated key: the last one, as a tree keeps it.
        let c = completion(br#"{"model":"a","model":"b"}"#);
        assert_eq!(c.model.as_deref(), Some("b"));
    }

    #[test]
    fn plain_strings_are_borrowed() {
        let data =
            br#"{"id":"c","choices":[{"delta":{"content":"plain"}},{"delta":{"content":"a\nb"}}]}"#;
        let Some(Read::Chunk(c)) = read(data) else {
            panic!("not read");
        };
        assert!(matches!(c.id, Some(Cow::Borrowed("c"))));
        let texts: Vec<_> = c
            .choices
            .iter()
            .map(|c| {
                c.delta
                    .as_ref()
                    .unwrap()
                    .content
                    .as_ref()
                    .unwrap()
                    .0
                    .clone()
            })
            .collect();
        assert!(matches!(texts[0], Cow::Borrowed("plain")));
        assert_eq!(texts[1], "a\nb");
    }
}
