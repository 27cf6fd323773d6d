//! Every row of the table, through the real translators: for each name a
//! client format spells and each provider of another format, the field
//! absent, present, and refused where the row says so.

use axum::http::HeaderMap;
use serde_json::{Map, Value, json};
use sluice_usage::{Endpoint, WireFormat};

use super::*;
use crate::providers::{Call, Provider, RequestError, for_format, front};

fn wire(f: Format) -> WireFormat {
    match f {
        Format::Openai => WireFormat::Openai,
        Format::Anthropic => WireFormat::Anthropic,
        Format::Gemini => WireFormat::Gemini,
    }
}

/// The upstream request a `client`-format `body` becomes for a provider
/// of format `provider` (its URL, body and what reading the answer
/// needs), or the 400.
fn translate(client: Format, provider: Format, body: &Value) -> Result<String, BadField> {
    let (adapter, endpoint): (&dyn Provider, Endpoint) = match client {
        Format::Openai => (for_format(wire(provider)), Endpoint::Chat),
        Format::Anthropic => (
            front::for_endpoint(wire(provider), Endpoint::Messages).unwrap(),
            Endpoint::Messages,
        ),
        Format::Gemini => (
            front::for_endpoint(wire(provider), Endpoint::Generate).unwrap(),
            Endpoint::Generate,
        ),
    };
    let model = match provider {
        Format::Openai => "gpt-4o-mini",
        Format::Anthropic => "claude-x",
        Format::Gemini => "gemini-x",
    };
    let headers = HeaderMap::new();
    let call = Call {
        endpoint,
        body,
        model,
        stream: body.get("stream") == Some(&Value::Bool(true)),
        headers: &headers,
        key: None,
        form: None,
        default_max_tokens: 100,
    };
    match adapter.request("http://127.0.0.1:9/v1", &call) {
        Ok(out) => Ok(format!(
            "{} {} {:?}",
            out.url,
            String::from_utf8_lossy(&out.body),
            out.exchange
        )),
        Err(RequestError::BadField(b)) => Err(b),
        Err(RequestError::Setup(s)) => panic!("setup: {s}"),
    }
}

/// The smallest body of each format, without the field `omit`.
fn base(client: Format, omit: &str) -> Value {
    let mut body = match client {
        Format::Openai => json!({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}),
        Format::Anthropic => json!({"model": "m", "max_tokens": 50,
            "messages": [{"role": "user", "content": "Hi"}]}),
        Format::Gemini => json!({"model": "m",
            "contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}),
    };
    body.as_object_mut().unwrap().remove(omit);
    body
}

/// A value for each name, that asks for something, and the fields it
/// needs beside it.
fn sample(client: Format, name: &str) -> Option<(Value, Value)> {
    let none = json!({});
    let v = match (client, name) {
        (_, "model") => json!("other"),
        (Format::Openai | Format::Anthropic, "messages") => {
            json!([{"role": "user", "content": "Hello"}])
        }
        (Format::Gemini, "contents") => json!([{"parts": [{"text": "Hello"}]}]),
        (Format::Anthropic, "system") => json!("Be brief."),
        (Format::Gemini, "systemInstruction") => json!({"parts": [{"text": "Be brief."}]}),
        (_, "max_completion_tokens" | "max_tokens" | "generationConfig.maxOutputTokens") => {
            json!(7)
        }
        (_, "stop" | "stop_sequences" | "generationConfig.stopSequences") => json!(["END"]),
        (_, "temperature" | "top_p" | "presence_penalty" | "frequency_penalty") => json!(0.5),
        (
            _,
            "generationConfig.temperature"
            | "generationConfig.topP"
            | "generationConfig.presencePenalty"
            | "generationConfig.frequencyPenalty",
        ) => json!(0.5),
        (_, "n" | "generationConfig.candidateCount") => json!(2),
        (_, "seed" | "generationConfig.seed") => json!(3),
        (_, "response_format") => json!({"type": "json_object"}),
        (_, "output_format") => json!({"type": "json_schema", "schema": {"type": "object"}}),
        (_, "generationConfig.responseMimeType") => json!("application/json"),
        (_, "generationConfig.responseSchema") => json!({"type": "OBJECT"}),
        (_, "generationConfig.responseJsonSchema") => json!({"type": "object"}),
        (Format::Openai, "tools") => json!([{"type": "function", "function": {"name": "f"}}]),
        (Format::Anthropic, "tools") => json!([{"name": "f", "input_schema": {"type": "object"}}]),
        (Format::Gemini, "tools") => json!([{"functionDeclarations": [{"name": "f"}]}]),
        (Format::Openai, "tool_choice") => json!("required"),
        (Format::Anthropic, "tool_choice") => json!({"type": "any"}),
        (Format::Gemini, "toolConfig") => json!({"functionCallingConfig": {"mode": "ANY"}}),
        (_, "parallel_tool_calls") => {
            let tools = json!([{"type": "function", "function": {"name": "f"}}]);
            return Some((json!({"tools": tools}), json!(false)));
        }
        (_, "tool_choice.disable_parallel_tool_use") => {
            return Some((json!({"tool_choice": {"type": "auto"}}), json!(true)));
        }
        (_, "user" | "metadata.user_id") => json!("u1"),
        (_, "stream") => json!(true),
        (_, "alt") => return Some((json!({"stream": true}), json!("sse"))),
        (_, "stream_options") => json!({"include_usage": true}),
        (_, "store") => json!(true),
        (_, "metadata") => json!({"k": "v"}),
        (_, "service_tier") => json!("auto"),
        (_, "labels") => json!({"team": "a"}),
        (_, "top_k" | "generationConfig.topK") => json!(5),
        (_, "logprobs" | "generationConfig.responseLogprobs") => json!(true),
        (_, "top_logprobs" | "generationConfig.logprobs") => json!(2),
        (_, "logit_bias") => json!({"1": 1}),
        (_, "reasoning_effort") => json!("low"),
        (_, "thinking") => json!({"type": "enabled", "budget_tokens": 1024}),
        (_, "generationConfig.thinkingConfig") => json!({"thinkingBudget": 100}),
        (_, "modalities") => json!(["audio"]),
        (_, "generationConfig.responseModalities") => json!(["IMAGE"]),
        (_, "safetySettings") => json!([{"category": "x", "threshold": "y"}]),
        (_, "cachedContent") => json!("cachedContents/c"),
        _ => return None,
    };
    Some((none, v))
}

/// A value that asks for nothing, for rows with one.
fn idle_sample(name: &str) -> Option<Value> {
    Some(match name {
        "n" | "generationConfig.candidateCount" => json!(1),
        "logprobs" => json!(false),
        "thinking" => json!({"type": "disabled"}),
        "modalities" => json!(["text"]),
        "generationConfig.responseModalities" => json!(["TEXT"]),
        _ => return None,
    })
}

/// `body` with `value` at the dotted `path`.
fn set(mut body: Value, path: &str, value: Value) -> Value {
    let mut at = &mut body;
    let parts: Vec<&str> = path.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        let obj = at.as_object_mut().unwrap();
        at = obj.entry(*p).or_insert_with(|| json!({}));
    }
    at[parts[parts.len() - 1]] = value;
    body
}

fn merge(mut body: Value, extra: &Value) -> Value {
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn others(client: Format) -> impl Iterator<Item = Format> {
    Format::ALL.into_iter().filter(move |p| *p != client)
}

#[test]
fn every_row_behaves_as_the_table_says_through_the_translators() {
    let mut checked = 0;
    for row in ROWS {
        let mut named = false;
        for client in Format::ALL {
            for name in names(row, client) {
                named = true;
                let (context, value) = sample(client, name)
                    .unwrap_or_else(|| panic!("row {:?}: no sample for {name}", row.what));
                if let Some(idle) = row.idle {
                    assert!(!idle(&value), "row {:?}: {name}'s sample is idle", row.what);
                }
                let top = name.split('.').next().unwrap();
                let absent = merge(base(client, top), &context);
                let present = set(absent.clone(), name, value);
                for provider in others(client) {
                    let at = format!("row {:?}, {name} from {client:?} to {provider:?}", row.what);
                    let without = translate(client, provider, &absent);
                    let with = translate(client, provider, &present);
                    if row.to[provider.index()] == To::Refused {
                        let e = with.expect_err(&at);
                        assert_eq!(e.field, name, "{at}: {e:?}");
                        let who = super::provider(provider);
                        assert!(e.message.contains(who), "{at}: {}", e.message);
                        checked += 1;
                        continue;
                    }
                    let with = with.unwrap_or_else(|e| panic!("{at}: {e:?}"));
                    if row.required.contains(&client) {
                        let e = without.expect_err(&at);
                        assert_eq!(e.field, name, "{at}: {e:?}");
                    } else {
                        let without = without.unwrap_or_else(|e| panic!("{at}: {e:?}"));
                        match (row.how, row.to[provider.index()]) {
                            (How::Routed, _) | (_, To::Dropped) => {
                                assert_eq!(with, without, "{at}: sent");
                            }
                            _ => assert_ne!(with, without, "{at}: not sent"),
                        }
                    }
                    checked += 1;
                }
            }
        }
        assert!(named, "row {:?} names no field any client sends", row.what);
    }
    assert!(checked > 100, "{checked}");
}

#[test]
fn idle_values_are_taken_by_every_provider() {
    for row in ROWS.iter().filter(|r| r.idle.is_some()) {
        let mut tried = false;
        for client in Format::ALL {
            for name in names(row, client) {
                let Some(value) = idle_sample(name) else {
                    continue;
                };
                assert!(row.idle.unwrap()(&value), "row {:?}: {name}", row.what);
                tried = true;
                let absent = base(client, "");
                let present = set(absent.clone(), name, value);
                for provider in others(client) {
                    let at = format!("row {:?}, {name} from {client:?} to {provider:?}", row.what);
                    translate(client, provider, &absent).unwrap_or_else(|e| panic!("{at}: {e:?}"));
                    translate(client, provider, &present).unwrap_or_else(|e| panic!("{at}: {e:?}"));
                }
            }
        }
        assert!(tried, "row {:?} has no idle sample", row.what);
    }
}

#[test]
fn a_field_no_row_spells_is_refused_by_name() {
    for (client, name, value) in [
        (Format::Openai, "functions", json!([])),
        (Format::Openai, "web_search_options", json!({})),
        (Format::Anthropic, "container", json!("c")),
        (Format::Anthropic, "metadata.team", json!("a")),
        (Format::Gemini, "fooBar", json!(1)),
        (Format::Gemini, "generationConfig.fooBar", json!(1)),
    ] {
        let body = set(base(client, ""), name, value);
        for provider in others(client) {
            let e = translate(client, provider, &body).unwrap_err();
            assert_eq!(e.field, name, "{client:?} to {provider:?}");
            assert!(
                e.message.contains(super::provider(provider)),
                "{}",
                e.message
            );
        }
    }
}

#[test]
fn renames_are_read_from_the_table() {
    assert_eq!(
        renamed(
            Format::Gemini,
            "generationConfig.candidateCount",
            Format::Openai
        ),
        Some("n")
    );
    assert_eq!(
        renamed(Format::Anthropic, "stop_sequences", Format::Openai),
        Some("stop")
    );
    // Converted rows are the translators' to write.
    assert_eq!(
        renamed(Format::Anthropic, "max_tokens", Format::Openai),
        None
    );
    assert_eq!(renamed(Format::Openai, "nope", Format::Gemini), None);
    // No two rows spell a name the same way in one format.
    for f in Format::ALL {
        let mut seen: Vec<&str> = Vec::new();
        for row in ROWS {
            for name in row.spelled[f.index()] {
                assert!(!seen.contains(name), "{f:?} spells {name} twice");
                seen.push(name);
            }
        }
    }
}

#[test]
fn the_docs_show_the_table() {
    let doc = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/clients.md"
    ));
    let table = markdown();
    assert!(
        doc.contains(&table),
        "docs/clients.md must hold the field table as providers::fields::markdown() writes \
         it:\n{table}"
    );
}

#[test]
fn check_names_the_provider_by_the_callers_refusal() {
    let body: Map<String, Value> = json!({"seed": 1}).as_object().unwrap().clone();
    let refuse = |f: &str| BadField::new(f, "refused by X");
    let e = check(&body, Format::Openai, Format::Anthropic, &refuse).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.message.as_str()),
        ("seed", "refused by X")
    );
    assert!(check(&body, Format::Openai, Format::Gemini, &refuse).is_ok());
}
