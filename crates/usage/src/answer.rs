//! A whole OpenAI answer read with the stream's JSON cursor
//! ([`Cursor`]): the usage and the tool calls that the typed parse of
//! [`wire::OpenaiBody`] reads (it stays the reference, and the fallback),
//! without serde matching every key and driving a visitor for each
//! (`RawUsage::lean` reads the usage object the same way).

use crate::stream::lean::{Cursor, Seen};
use crate::wire::{self, RawUsage};

/// The usage and the tool-call count of an OpenAI body (chat,
/// embeddings, `/responses`), as [`wire::OpenaiBody`] reads them; `None`
/// when the cursor cannot be sure to read the body as serde would (then
/// parse it typed).
pub(crate) fn openai(body: &[u8]) -> Option<(Option<RawUsage>, u32)> {
    let mut c = Cursor::new(body)?;
    if c.peek()? != b'{' {
        return None;
    }
    let mut seen = Seen::default();
    let (mut usage, mut calls) = (None, 0usize);
    c.object(|c, key| match key {
        "usage" => {
            seen.first(0)?;
            if !c.null()? {
                usage = Some(RawUsage::lean(c)?);
            }
            Some(())
        }
        "choices" => {
            seen.first(1)?;
            if !c.null()? {
                c.array(|c| choice(c, &mut calls))?;
            }
            Some(())
        }
        "output" => {
            seen.first(2)?;
            if !c.null()? {
                c.array(|c| output_item(c, &mut calls))?;
            }
            Some(())
        }
        _ => c.skip(),
    })?;
    if !c.at_end() {
        return None;
    }
    Some((usage, wire::saturate(calls)))
}

/// One element of `choices`: its `message`'s `tool_calls` (each one a
/// call) and legacy `function_call` (one).
fn choice(c: &mut Cursor<'_>, calls: &mut usize) -> Option<()> {
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "message" => {
            seen.first(0)?;
            if c.null()? {
                return Some(());
            }
            let mut seen = Seen::default();
            c.object(|c, key| match key {
                "tool_calls" => {
                    seen.first(0)?;
                    if !c.null()? {
                        *calls += c.array(|c| c.skip())?;
                    }
                    Some(())
                }
                "function_call" => {
                    seen.first(1)?;
                    if !c.null()? {
                        c.skip()?;
                        *calls += 1;
                    }
                    Some(())
                }
                _ => c.skip(),
            })
        }
        _ => c.skip(),
    })
}

/// One element of a `/responses` `output`: a call when its `type` is
/// `function_call`.
fn output_item(c: &mut Cursor<'_>, calls: &mut usize) -> Option<()> {
    let mut seen = Seen::default();
    let mut call = false;
    c.object(|c, key| match key {
        "type" => {
            seen.first(0)?;
            if !c.null()? {
                call = c.string()?.plain()? == "function_call";
            }
            Some(())
        }
        _ => c.skip(),
    })?;
    *calls += usize::from(call);
    Some(())
}

#[cfg(test)]
mod tests {
    use crate::dialect::openai::typed as typed_openai;
    use crate::{BodyFacts, Endpoint, WireFormat, read_body};

    fn both(body: &str) -> (BodyFacts, BodyFacts) {
        let b = body.as_bytes();
        (
            read_body(WireFormat::Openai, Endpoint::Chat, b),
            typed_openai(Endpoint::Chat, b),
        )
    }

    #[test]
    fn the_cursor_reads_what_the_typed_parse_reads() {
        // (body, whether the cursor reads it itself)
        let cases = [
            (
                r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi \"x\" \u00e9","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b"}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}"#,
                true,
            ),
            (
                r#"{"choices":[{"message":{"function_call":{"name":"f"}}},{"message":null},{}],"usage":null}"#,
                true,
            ),
            (
                r#"{"output":[{"type":"function_call"},{"type":"message"},{"type":null},{}],"usage":{"input_tokens":3,"output_tokens":4}}"#,
                true,
            ),
            (
                r#" {"data":[{"embedding":[0.1,-2e-3,3]}],"usage":{"prompt_tokens":5,"total_tokens":5}} "#,
                true,
            ),
            (r#"{"choices":null,"output":null}"#, true),
            (
                r#"{"choices":[{"message":{"tool_calls":null,"function_call":null}}]}"#,
                true,
            ),
            // What the cursor leaves to serde: duplicates, escaped keys and
            // values it compares, shapes serde reads otherwise or rejects.
            (
                r#"{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}"#,
                false,
            ),
            (r#"{"us\u0061ge":{"prompt_tokens":1}}"#, false),
            (r#"{"output":[{"type":"function\u005fcall"}]}"#, false),
            (r#"{"choices":[null],"usage":{"prompt_tokens":1}}"#, false),
            (
                r#"{"choices":[{"message":{"tool_calls":{}}}],"usage":{"prompt_tokens":1}}"#,
                false,
            ),
            (r#"{"usage":"many"}"#, false),
            (r#"{"usage":{"prompt_tokens":-1}}"#, false),
            (r#"{"usage":{"prompt_tokens":-0}}"#, false),
            (r#"{"usage":{"prompt_tokens":1.0}}"#, false),
            (r#"{"usage":{"prompt_tokens":1e2}}"#, false),
            (r#"{"usage":{"prompt_tokens":18446744073709551616}}"#, false),
            (r#"{"usage":{"prompt_tokens":1,"prompt_tokens":1}}"#, false),
            (
                r#"{"usage":{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2}}}"#,
                false,
            ),
            (r#"{"usage":[1,2,3]}"#, false),
            (
                r#"{"usage":{"prompt_tokens":18446744073709551615,"total_tokens":null,"prompt_tokens_details":null,"input_tokens_details":{"cached_tokens":3,"x":[]},"output_tokens_details":{},"extra":{"a":1}}}"#,
                true,
            ),
            (
                r#"{"usage":{"input_tokens":7,"output_tokens":8,"output_tokens_details":{"reasoning_tokens":5}}}"#,
                true,
            ),
            // Pretty-printed: whitespace between values, none in strings.
            (
                "{\n  \"usage\": {\"prompt_tokens\": 1},\n\t\"choices\": [{\"message\": {\"content\": \"a\\\"b\", \"tool_calls\": [{}]}}]\r\n}",
                true,
            ),
            // A raw control character in a string: serde rejects the body.
            (
                "{\"choices\":[{\"message\":{\"content\":\"tab\there\"}}],\"usage\":{\"prompt_tokens\":1}}",
                false,
            ),
            (r#"{"usage":{"prompt_tokens":1}} x"#, false),
            (r#"[{"prompt_tokens":1},null,null]"#, false),
            (
                r#"{"usage":{"prompt_tokens":1},"choices":[{"message":{"tool_calls":[1,}]}}]}"#,
                false,
            ),
            ("not json", false),
        ];
        for (body, lean) in cases {
            let (read, typed) = both(body);
            assert_eq!(read, typed, "{body}");
            assert_eq!(super::openai(body.as_bytes()).is_some(), lean, "{body}");
        }
        let (read, _) = both(cases[0].0);
        assert_eq!(read.tool_calls, 2);
        assert_eq!(read.usage.map(|u| u.total_tokens), Some(21));
        assert_eq!(both(cases[1].0).0.tool_calls, 1);
        assert_eq!(both(cases[2].0).0.tool_calls, 1);
    }

    proptest::proptest! {
        // Bodies made of the fields it reads, in any order and shape.
        #[test]
        fn the_cursor_never_reads_otherwise(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                r#""usage":{"prompt_tokens":3,"completion_tokens":4}"#,
                r#""usage":null"#,
                r#""usage":[1]"#,
                r#""usage":{"prompt_tokens":2,"prompt_tokens":3}"#,
                r#""usage":{"input_tokens":1.5,"output_tokens":null}"#,
                r#""usage":{"completion_tokens_details":{"reasoning_tokens":4},"prompt_tokens_details":null}"#,
                r#""choices":[{"message":{"tool_calls":[{},{}]}}]"#,
                r#""choices":[{"message":{"function_call":1,"tool_calls":null}}]"#,
                r#""choices":[{"message":[]}]"#,
                r#""choices":{}"#,
                r#""output":[{"type":"function_call"},{"type":"x"}]"#,
                r#""output":[{"type":1}]"#,
                r#""id":"x","n":[1,2.5e3,{"a":null}]"#,
                r#""model":"m""#,
            ]), 0..5),
        ) {
            let body = format!("{{{}}}", parts.join(","));
            let (read, typed) = both(&body);
            proptest::prop_assert_eq!(read, typed, "{}", body);
        }
    }
}
