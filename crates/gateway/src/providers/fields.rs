//! Translation as one table: each request field of each client format
//! (OpenAI chat, Anthropic Messages, Gemini `generateContent`), how it is
//! spelled in the others, and whether a provider of each format can take
//! it when the call is translated.
//!
//! The translators consult [`ROWS`] for every top-level field (and every
//! field of a container such as Gemini's `generationConfig`): a field no
//! row spells, or one whose row a provider refuses, is a 400 naming the
//! field and the provider ([`check`]); the plain renames are read from it
//! ([`renamed`]). A new format is one more column: one more [`Format`],
//! one more entry in every row's `spelled` and `to`. docs/clients.md
//! holds the table as [`markdown`] writes it (a test keeps them equal).
//!
//! A call whose client format is its provider's is passed through and
//! never consults the table.

#[cfg(test)]
mod tests;

use serde_json::Value;
use sluice_usage::WireFormat;

use super::BadField;

/// A wire format, as a column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Openai,
    Anthropic,
    Gemini,
}

/// The number of columns.
const FORMATS: usize = 3;

impl Format {
    /// Every column, in order.
    #[cfg(test)]
    pub(crate) const ALL: [Format; FORMATS] = [Format::Openai, Format::Anthropic, Format::Gemini];

    /// The column of a provider's wire format (Azure speaks OpenAI's).
    pub(crate) fn of(format: WireFormat) -> Format {
        match format {
            WireFormat::Openai | WireFormat::Azure => Format::Openai,
            WireFormat::Anthropic => Format::Anthropic,
            WireFormat::Gemini => Format::Gemini,
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The format's name in the documentation's table.
    #[cfg(test)]
    fn title(self) -> &'static str {
        match self {
            Format::Openai => "OpenAI chat",
            Format::Anthropic => "Anthropic Messages",
            Format::Gemini => "Gemini generateContent",
        }
    }
}

/// How a field's value changes on the way between formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// The gateway routes the call by it; the provider gets its own.
    Routed,
    /// The same value under each format's name.
    Renamed,
    /// Rewritten into the other format's shape.
    Converted,
    /// No counterpart in another format: only a provider of the client's
    /// own format (passed through) takes it.
    Untranslated,
}

/// What a provider of a format does with the field when the call is
/// translated to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum To {
    /// Sent, in the provider's terms.
    Taken,
    /// Not sent: it has no effect on the answer there (see the row's note).
    Dropped,
    /// A 400 naming the field and the provider (unless the value asks
    /// for nothing, see [`Row::idle`]).
    Refused,
}

/// One field, across the formats.
#[derive(Debug)]
pub(crate) struct Row {
    /// What the field is, naming the row in the docs and in test failures
    /// (this and the other fields only they read are not dead code).
    #[cfg_attr(not(test), allow(dead_code))]
    pub what: &'static str,
    /// How each format's clients spell it (a dotted path below a
    /// container), by [`Format`]; empty when the format has no such field.
    /// A name with `[` is inside `messages` and not checked here.
    pub spelled: [&'static [&'static str]; FORMATS],
    /// How the value changes on the way.
    pub how: How,
    /// What a provider of each format does with it, by [`Format`].
    pub to: [To; FORMATS],
    /// Values that ask for nothing (`n: 1`, thinking disabled): taken by
    /// every provider, whatever `to` says.
    pub idle: Option<fn(&Value) -> bool>,
    /// Formats whose clients must send it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub required: &'static [Format],
    /// What the docs add.
    #[cfg_attr(not(test), allow(dead_code))]
    pub note: &'static str,
}

use Format::{Anthropic as A, Gemini as G, Openai as O};
use To::{Dropped, Refused, Taken};

const ALL_TAKE: [To; FORMATS] = [Taken, Taken, Taken];
const NONE_TAKE: [To; FORMATS] = [Refused, Refused, Refused];

fn is_one(v: &Value) -> bool {
    v.as_u64() == Some(1)
}

fn is_false(v: &Value) -> bool {
    v == &Value::Bool(false)
}

fn thinking_off(v: &Value) -> bool {
    v.get("type").and_then(Value::as_str) == Some("disabled")
}

fn text_only(v: &Value) -> bool {
    v.as_array().is_some_and(|m| {
        m.iter()
            .all(|m| m.as_str().is_some_and(|m| m.eq_ignore_ascii_case("text")))
    })
}

/// A row that takes every value, required by no format, without a note.
const fn row(
    what: &'static str,
    how: How,
    to: [To; FORMATS],
    spelled: [&'static [&'static str]; FORMATS],
) -> Row {
    Row {
        what,
        spelled,
        how,
        to,
        idle: None,
        required: &[],
        note: "",
    }
}

impl Row {
    const fn idle(self, idle: fn(&Value) -> bool) -> Row {
        Row {
            idle: Some(idle),
            ..self
        }
    }

    const fn required(self, required: &'static [Format]) -> Row {
        Row { required, ..self }
    }

    const fn note(self, note: &'static str) -> Row {
        Row { note, ..self }
    }
}

/// The table. Order is the docs'. Each row: what the field is, how it
/// travels, what a provider of each format does with it, and how each
/// format spells it.
#[rustfmt::skip]
pub(crate) const ROWS: &[Row] = &[
    row("model", How::Routed, ALL_TAKE, [&["model"], &["model"], &["model"]])
        .note("a Gemini client's is in the path"),
    row("conversation", How::Converted, ALL_TAKE, [&["messages"], &["messages"], &["contents"]])
        .required(&[O, A, G])
        .note("text, images, tool calls and tool results; other parts → 400"),
    row("system prompt", How::Converted, ALL_TAKE,
        [&["messages[].role: system"], &["system"], &["systemInstruction"]]),
    row("output limit", How::Converted, ALL_TAKE,
        [&["max_completion_tokens", "max_tokens"], &["max_tokens"],
         &["generationConfig.maxOutputTokens"]])
        .required(&[A])
        .note("`max_completion_tokens` to OpenAI's reasoning models"),
    row("stop sequences", How::Renamed, ALL_TAKE,
        [&["stop"], &["stop_sequences"], &["generationConfig.stopSequences"]]),
    row("temperature", How::Renamed, ALL_TAKE,
        [&["temperature"], &["temperature"], &["generationConfig.temperature"]]),
    row("nucleus sampling", How::Renamed, ALL_TAKE,
        [&["top_p"], &["top_p"], &["generationConfig.topP"]]),
    row("choices", How::Renamed, [Taken, Refused, Taken],
        [&["n"], &[], &["generationConfig.candidateCount"]])
        .idle(is_one)
        .note("1 is taken by every provider"),
    row("seed", How::Renamed, [Taken, Refused, Taken],
        [&["seed"], &[], &["generationConfig.seed"]]),
    row("presence penalty", How::Renamed, [Taken, Refused, Taken],
        [&["presence_penalty"], &[], &["generationConfig.presencePenalty"]]),
    row("frequency penalty", How::Renamed, [Taken, Refused, Taken],
        [&["frequency_penalty"], &[], &["generationConfig.frequencyPenalty"]]),
    row("JSON output", How::Converted, ALL_TAKE,
        [&["response_format"], &["output_format"],
         &["generationConfig.responseMimeType", "generationConfig.responseSchema",
           "generationConfig.responseJsonSchema"]])
        .note("to Anthropic a forced call of a tool whose input is the answer (with tools of \
               the client's own → 400)"),
    row("tools", How::Converted, ALL_TAKE, [&["tools"], &["tools"], &["tools"]])
        .note("function tools; a provider's own tools (web search, code execution, …) → 400"),
    row("tool choice", How::Converted, ALL_TAKE,
        [&["tool_choice"], &["tool_choice"], &["toolConfig"]])
        .note("Gemini's `ANY` with several allowed functions → 400 elsewhere"),
    row("parallel tool calls", How::Converted, [Taken, Taken, Dropped],
        [&["parallel_tool_calls"], &["tool_choice.disable_parallel_tool_use"], &[]])
        .note("Gemini has no such switch"),
    row("end user", How::Renamed, [Taken, Taken, Dropped],
        [&["user"], &["metadata.user_id"], &[]])
        .note("an abuse-monitoring id: Gemini has none"),
    row("stream", How::Converted, ALL_TAKE, [&["stream"], &["stream"], &["stream", "alt"]])
        .note("a Gemini client's is its path (`:streamGenerateContent`, `?alt=sse`)"),
    row("stream usage", How::Converted, ALL_TAKE, [&["stream_options"], &[], &[]])
        .note("usage is always asked of the provider; an OpenAI client gets it when it asks"),
    row("storage and billing", How::Untranslated, [Dropped, Dropped, Dropped],
        [&["store", "metadata", "service_tier"], &["service_tier"], &["labels"]])
        .note("where a provider would store or bill the call: no effect on the answer"),
    row("top-k sampling", How::Untranslated, NONE_TAKE,
        [&[], &["top_k"], &["generationConfig.topK"]]),
    row("log probabilities", How::Untranslated, NONE_TAKE,
        [&["logprobs", "top_logprobs"], &[],
         &["generationConfig.responseLogprobs", "generationConfig.logprobs"]])
        .idle(is_false)
        .note("`false` is taken by every provider"),
    row("token bias", How::Untranslated, NONE_TAKE, [&["logit_bias"], &[], &[]]),
    row("reasoning", How::Untranslated, NONE_TAKE,
        [&["reasoning_effort"], &["thinking"], &["generationConfig.thinkingConfig"]])
        .idle(thinking_off)
        .note("`thinking: {\"type\": \"disabled\"}` is taken by every provider"),
    row("output modalities", How::Untranslated, NONE_TAKE,
        [&["modalities"], &[], &["generationConfig.responseModalities"]])
        .idle(text_only)
        .note("text only is taken by every provider"),
    row("safety settings", How::Untranslated, NONE_TAKE, [&[], &[], &["safetySettings"]]),
    row("cached content", How::Untranslated, NONE_TAKE, [&[], &[], &["cachedContent"]]),
];

/// The names `format`'s clients use that this table checks (those inside
/// `messages` are the translators').
fn names(row: &Row, format: Format) -> impl Iterator<Item = &'static str> {
    row.spelled[format.index()]
        .iter()
        .copied()
        .filter(|n| !n.contains('['))
}

/// The row that spells `name` in `format`.
fn row_of(format: Format, name: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| names(r, format).any(|n| n == name))
}

/// The value at a dotted `path` of `body`, if set.
fn at<'a>(body: &'a serde_json::Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut v = body.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    Some(v).filter(|v| !v.is_null())
}

/// Checks a `client`-format body for a provider of format `provider`:
/// every top-level field (and every field of a container such as
/// `generationConfig`) must be one a row spells, and no row the provider
/// refuses may be set to more than its idle value. `refuse` makes the 400
/// for a field (naming it and the provider).
///
/// # Errors
/// The first field that is unknown or refused.
pub(crate) fn check(
    body: &serde_json::Map<String, Value>,
    client: Format,
    provider: Format,
    refuse: &dyn Fn(&str) -> BadField,
) -> Result<(), BadField> {
    for (key, value) in body {
        if value.is_null() || row_of(client, key).is_some() {
            continue;
        }
        let prefix = format!("{key}.");
        let container = ROWS
            .iter()
            .any(|r| names(r, client).any(|n| n.starts_with(&prefix)));
        if !container {
            return Err(refuse(key));
        }
        // A container's fields, each spelled by a row (a malformed
        // container is the translator's to name).
        for (sub, v) in value.as_object().into_iter().flatten() {
            let name = format!("{prefix}{sub}");
            if !v.is_null() && row_of(client, &name).is_none() {
                return Err(refuse(&name));
            }
        }
    }
    for row in ROWS {
        if row.to[provider.index()] != To::Refused {
            continue;
        }
        for name in names(row, client) {
            if let Some(v) = at(body, name)
                && !row.idle.is_some_and(|idle| idle(v))
            {
                return Err(refuse(name));
            }
        }
    }
    Ok(())
}

/// The name in `to` of a field that `from` spells `name`, when its row is
/// a plain rename (the same value under each format's name).
pub(crate) fn renamed(from: Format, name: &str, to: Format) -> Option<&'static str> {
    row_of(from, name)
        .filter(|r| r.how == How::Renamed)
        .and_then(|r| r.spelled[to.index()].first().copied())
}

/// The table as docs/clients.md shows it (a test keeps the two equal).
#[cfg(test)]
pub(crate) fn markdown() -> String {
    let mut out = String::from("| field |");
    for f in Format::ALL {
        out.push_str(&format!(" {} |", f.title()));
    }
    out.push_str(" how |");
    for f in Format::ALL {
        out.push_str(&format!(" to {} |", provider(f)));
    }
    out.push_str(" notes |\n|---|");
    for _ in 0..2 * FORMATS + 2 {
        out.push_str("---|");
    }
    out.push('\n');
    for row in ROWS {
        out.push_str(&format!("| {} |", row.what));
        for f in Format::ALL {
            let spelled: Vec<String> = row.spelled[f.index()]
                .iter()
                .map(|n| format!("`{n}`"))
                .collect();
            let mut cell = if spelled.is_empty() {
                "—".to_owned()
            } else {
                spelled.join(", ")
            };
            if row.required.contains(&f) {
                cell.push_str(" (required)");
            }
            out.push_str(&format!(" {cell} |"));
        }
        let how = match row.how {
            How::Routed => "routed",
            How::Renamed => "renamed",
            How::Converted => "converted",
            How::Untranslated => "untranslated",
        };
        out.push_str(&format!(" {how} |"));
        for f in Format::ALL {
            let to = match row.to[f.index()] {
                To::Taken => "taken",
                To::Dropped => "not sent",
                To::Refused => "400",
            };
            out.push_str(&format!(" {to} |"));
        }
        out.push_str(&format!(" {} |\n", row.note));
    }
    out
}

/// A provider of `format`, as the docs name it.
#[cfg(test)]
fn provider(format: Format) -> &'static str {
    match format {
        Format::Openai => "OpenAI",
        Format::Anthropic => "Anthropic",
        Format::Gemini => "Gemini",
    }
}
