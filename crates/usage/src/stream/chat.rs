//! OpenAI chat stream chunks read with the [`Cursor`]: the same facts as
//! the typed parse of [`crate::wire::ChatChunk`] (which stays the reference, and
//! the fallback), without building the chunk; the `usage` object, in the
//! last chunk, by `RawUsage::lean`.

use super::lean::{Cursor, Seen, optional_str};
use crate::wire::RawUsage;

/// What one chat chunk says, borrowed from its bytes.
#[derive(Default)]
pub(crate) struct ChunkFacts<'a> {
    pub(crate) id: Option<&'a str>,
    pub(crate) model: Option<&'a str>,
    /// Each choice's finish reason, in order, where it is set.
    pub(crate) finish_reasons: Vec<&'a str>,
    /// Output characters in the deltas.
    pub(crate) chars: u64,
    /// Tool calls that start here (their piece carries an `id`).
    pub(crate) tool_calls: usize,
    pub(crate) usage: Option<RawUsage>,
    /// `choices` is present and empty (with `usage`: the usage-only chunk).
    pub(crate) no_choices: bool,
}

/// Reads `data` as serde would read a [`crate::wire::ChatChunk`]: its
/// facts, or `None` where the cursor cannot tell (then parse it typed:
/// serde decides, a chunk it rejects included).
pub(crate) fn read(data: &[u8]) -> Option<ChunkFacts<'_>> {
    let mut c = Cursor::new(data)?;
    if c.peek()? != b'{' {
        return None;
    }
    let mut facts = ChunkFacts::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "id" => {
            seen.first(0)?;
            facts.id = optional_str(c)?;
            Some(())
        }
        "model" => {
            seen.first(1)?;
            facts.model = optional_str(c)?;
            Some(())
        }
        "choices" => {
            seen.first(2)?;
            if c.null()? {
                return Some(());
            }
            let n = c.array(|c| choice(c, &mut facts))?;
            facts.no_choices = n == 0;
            Some(())
        }
        "usage" => {
            seen.first(3)?;
            if !c.null()? {
                facts.usage = Some(RawUsage::lean(c)?);
            }
            Some(())
        }
        _ => c.skip(),
    })?;
    if !c.at_end() {
        return None;
    }
    Some(facts)
}

/// One element of `choices`: an object with `delta` and `finish_reason`.
fn choice<'a>(c: &mut Cursor<'a>, facts: &mut ChunkFacts<'a>) -> Option<()> {
    let mut seen = Seen::default();
    let mut reason = None;
    c.object(|c, key| match key {
        "delta" => {
            seen.first(0)?;
            if !c.null()? {
                delta(c, facts)?;
            }
            Some(())
        }
        "finish_reason" => {
            seen.first(1)?;
            reason = optional_str(c)?;
            Some(())
        }
        _ => c.skip(),
    })?;
    facts.finish_reasons.extend(reason);
    Some(())
}

/// A choice's `delta`: its text fields and tool-call pieces.
fn delta(c: &mut Cursor<'_>, facts: &mut ChunkFacts<'_>) -> Option<()> {
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "content" | "reasoning_content" | "refusal" => {
            seen.first(match key {
                "content" => 0,
                "refusal" => 1,
                _ => 2,
            })?;
            facts.chars = facts.chars.saturating_add(chars(c)?);
            Some(())
        }
        "tool_calls" => {
            seen.first(3)?;
            if !c.null()? {
                c.array(|c| tool_call(c, facts))?;
            }
            Some(())
        }
        _ => c.skip(),
    })
}

/// One tool-call piece: whether it has an `id`, its arguments' length.
fn tool_call(c: &mut Cursor<'_>, facts: &mut ChunkFacts<'_>) -> Option<()> {
    let mut seen = Seen::default();
    let mut starts = false;
    c.object(|c, key| match key {
        "id" => {
            seen.first(0)?;
            starts = !c.null()?;
            if starts {
                c.skip()?;
            }
            Some(())
        }
        "function" => {
            seen.first(1)?;
            if c.null()? {
                return Some(());
            }
            let mut seen = Seen::default();
            c.object(|c, key| match key {
                "arguments" => {
                    seen.first(0)?;
                    facts.chars = facts.chars.saturating_add(chars(c)?);
                    Some(())
                }
                _ => c.skip(),
            })
        }
        _ => c.skip(),
    })?;
    facts.tool_calls += usize::from(starts);
    Some(())
}

/// A text field as [`crate::wire::Chars`] counts it: a string's characters, any
/// other value 0.
fn chars(c: &mut Cursor<'_>) -> Option<u64> {
    if c.peek()? == b'"' {
        return c.string()?.chars();
    }
    c.skip().map(|_| 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire;

    /// What both readings keep of a chunk: id, model, finish reasons,
    /// characters, tool calls started, whether it has usage, whether its
    /// `choices` is empty.
    #[derive(Debug, PartialEq)]
    struct Reading(
        Option<String>,
        Option<String>,
        Vec<String>,
        u64,
        usize,
        bool,
        bool,
    );

    /// The typed parse's reading of `data`.
    fn typed(data: &[u8]) -> Option<Reading> {
        let chunk = serde_json::from_slice::<wire::ChatChunk>(data).ok()?;
        let choices = chunk.choices.as_deref().unwrap_or_default();
        let reasons = choices
            .iter()
            .filter_map(|c| c.finish_reason.clone())
            .collect();
        let deltas = || choices.iter().filter_map(|c| c.delta.as_ref());
        let chars = deltas().map(wire::ChunkDelta::chars).sum();
        let calls = deltas()
            .flat_map(|d| d.tool_calls.iter().flatten())
            .filter(|t| t.id.is_some())
            .count();
        let empty = chunk.choices.as_ref().is_some_and(Vec::is_empty);
        Some(Reading(
            chunk.id,
            chunk.model,
            reasons,
            chars,
            calls,
            chunk.usage.is_some(),
            empty,
        ))
    }

    /// The cursor's reading: `None` when it defers to the typed parse.
    fn lean(data: &[u8]) -> Option<Reading> {
        let facts = read(data)?;
        Some(Reading(
            facts.id.map(str::to_owned),
            facts.model.map(str::to_owned),
            facts
                .finish_reasons
                .iter()
                .map(|r| (*r).to_owned())
                .collect(),
            facts.chars,
            facts.tool_calls,
            facts.usage.is_some(),
            facts.no_choices,
        ))
    }

    #[test]
    fn reads_what_the_typed_parse_reads_or_defers_to_it() {
        let cases: &[&str] = &[
            r#"{"choices":[{"delta":{"content":"pace","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1795714256,"id":"chatcmpl-sim1","model":"gpt-4o-mini","object":"chat.completion.chunk","usage":null}"#,
            r#"{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":1}}}"#,
            r#" { "choices" : [ { "delta" : { "content" : "h\u00e9\n\"x\" \ud83d\ude00 ü" } , "finish_reason" : "stop" } , {"delta":{"refusal":"no","reasoning_content":"abc"},"finish_reason":"length"} ] } "#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{\"a\""}},{"index":1,"id":null,"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"content":7,"refusal":[1,{"a":-0.5e+3}],"reasoning_content":true}}]}"#,
            r#"{"choices":null,"model":null,"id":null,"x":{"y":[[],{},"",0,false]}}"#,
            r#"{"choices":[{"delta":null}],"usage":{"prompt_tokens":"many"}}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"id":"x","id":"y"}"#,
            r#"{"choices":[{"delta":{"content":"a\ud800"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a\u+abc"}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}]} x"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"n":01}"#,
            r#"{"choices":[null]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"t":tru}"#,
            r#"{"ch\u006fices":[]}"#,
            r#"["a","b",null,null]"#,
            "{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
            r#"{"choices":[{"delta":{"content":"a"}}],"#,
        ];
        for case in cases {
            let want = typed(case.as_bytes());
            // Deferred (`None`): the typed parse decides, as before.
            if let Some(got) = lean(case.as_bytes()) {
                assert_eq!(Some(got), want, "{case}");
            }
        }
        // The common chunks are read, not deferred.
        for case in &cases[..6] {
            assert!(read(case.as_bytes()).is_some(), "{case}");
        }
        // A usage serde rejects is left to serde.
        assert!(read(cases[6].as_bytes()).is_none());
    }
}
