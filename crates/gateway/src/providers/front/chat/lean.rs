//! A stream chunk, or a whole completion, walked with the stream
//! scanner's cursor
//! ([`sluice_usage::JsonCursor`]), reading what the typed reading reads
//! (`chat.rs`) without serde's per-key visitors: `None` for anything it
//! is not sure to read as the typed reading would (a string with escapes,
//! a field of another type, a repeated key, an `error`), which then
//! decides.

use std::borrow::Cow;

use sluice_usage::{JsonCursor as Cursor, JsonSeen as Seen};

use super::{Answered, Choice, Chunk, Completion, Delta, Function, Message, Text, ToolCall};

/// The chunk in `data`, or `None` (see the module doc).
pub(super) fn chunk(data: &[u8]) -> Option<Chunk<'_>> {
    let mut c = Cursor::new(data)?;
    if c.peek()? != b'{' {
        return None;
    }
    let mut chunk = Chunk::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "id" => {
            seen.first(0)?;
            chunk.id = text(c)?.map(|t| t.0);
            Some(())
        }
        "model" => {
            seen.first(1)?;
            chunk.model = text(c)?.map(|t| t.0);
            Some(())
        }
        "choices" => {
            seen.first(2)?;
            if !c.null()? {
                c.array(|c| {
                    chunk.choices.push(choice(c)?);
                    Some(())
                })?;
            }
            Some(())
        }
        // The provider's error: the typed reading's.
        "error" => None,
        _ => c.skip(),
    })?;
    c.at_end().then_some(chunk)
}

/// `null`, or a string without escapes (borrowed).
fn text<'a>(c: &mut Cursor<'a>) -> Option<Option<Text<'a>>> {
    Some(sluice_usage::json_optional_str(c)?.map(|s| Text(Cow::Borrowed(s))))
}

fn choice<'a>(c: &mut Cursor<'a>) -> Option<Choice<'a>> {
    let mut choice = Choice::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "index" => {
            seen.first(0)?;
            choice.index = c.optional_u64()?;
            Some(())
        }
        "delta" => {
            seen.first(1)?;
            if !c.null()? {
                choice.delta = Some(delta(c)?);
            }
            Some(())
        }
        "finish_reason" => {
            seen.first(2)?;
            choice.finish_reason = text(c)?;
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(choice)
}

fn delta<'a>(c: &mut Cursor<'a>) -> Option<Delta<'a>> {
    let mut delta = Delta::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "content" => {
            seen.first(0)?;
            delta.content = text(c)?;
            Some(())
        }
        "tool_calls" => {
            seen.first(1)?;
            if !c.null()? {
                let mut calls = Vec::new();
                c.array(|c| {
                    calls.push(tool_call(c)?);
                    Some(())
                })?;
                delta.tool_calls = Some(calls);
            }
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(delta)
}

fn tool_call<'a>(c: &mut Cursor<'a>) -> Option<ToolCall<'a>> {
    let mut call = ToolCall::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "index" => {
            seen.first(0)?;
            call.index = c.optional_u64()?;
            Some(())
        }
        "id" => {
            seen.first(1)?;
            call.id = text(c)?;
            Some(())
        }
        "function" => {
            seen.first(2)?;
            if c.null()? {
                return Some(());
            }
            let mut f = Function::default();
            let mut seen = Seen::default();
            c.object(|c, key| match key {
                "name" => {
                    seen.first(0)?;
                    f.name = text(c)?;
                    Some(())
                }
                "arguments" => {
                    seen.first(1)?;
                    f.arguments = text(c)?;
                    Some(())
                }
                _ => c.skip(),
            })?;
            call.function = Some(f);
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(call)
}

/// A whole completion in `body`, or `None` (see the module doc; a
/// message with tool calls is also the typed reading's).
pub(super) fn completion(body: &[u8]) -> Option<Completion<'_>> {
    let mut c = Cursor::new(body)?;
    if c.peek()? != b'{' {
        return None;
    }
    let mut read = Completion::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "id" => {
            seen.first(0)?;
            read.id = text(c)?;
            Some(())
        }
        "model" => {
            seen.first(1)?;
            read.model = text(c)?;
            Some(())
        }
        "choices" => {
            seen.first(2)?;
            if !c.null()? {
                c.array(|c| {
                    let choice = answered(c)?;
                    read.choice.get_or_insert(choice);
                    Some(())
                })?;
            }
            Some(())
        }
        _ => c.skip(),
    })?;
    c.at_end().then_some(read)
}

fn answered<'a>(c: &mut Cursor<'a>) -> Option<Answered<'a>> {
    let mut choice = Answered::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "message" => {
            seen.first(0)?;
            if c.null()? {
                return Some(());
            }
            let mut message = Message::default();
            let mut seen = Seen::default();
            c.object(|c, key| match key {
                "content" => {
                    seen.first(0)?;
                    message.content = text(c)?;
                    Some(())
                }
                // Tool calls: the typed reading's.
                "tool_calls" => {
                    seen.first(1)?;
                    c.null()?.then_some(())
                }
                _ => c.skip(),
            })?;
            choice.message = Some(message);
            Some(())
        }
        "finish_reason" => {
            seen.first(1)?;
            choice.finish_reason = text(c)?;
            Some(())
        }
        _ => c.skip(),
    })?;
    Some(choice)
}
