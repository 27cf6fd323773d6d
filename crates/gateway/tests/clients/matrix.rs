//! The matrix: {OpenAI chat, Anthropic messages, Gemini generateContent}
//! in × {openai, anthropic, gemini} providers out × {plain, stream} ×
//! {text, tool call, JSON mode}. Every cell answers in the client's
//! format, with the provider's usage in the client's terms, and the
//! ledger records the tokens the sim served (limits high enough that no
//! answer is cut: the sim writes a tool call or a JSON document whole).

use super::common::{ACME, Harness, sim_config};
use super::{MODELS, config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_ledger::LedgerStore;

#[derive(Debug, Clone, Copy)]
enum Client {
    Chat,
    Messages,
    Generate,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Tool,
    Json,
}

/// What a cell's answer said, read from the client's format.
#[derive(Debug, Default)]
struct Said {
    text: String,
    tool: Option<(String, String)>,
    input_tokens: u64,
    output_tokens: u64,
}

fn schema() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
}

fn request(client: Client, model: &str, kind: Kind, stream: bool) -> (String, Value) {
    let ask = "What is the weather in Paris?";
    match client {
        Client::Chat => {
            let mut b = json!({"model": model, "max_tokens": 400, "stream": stream,
                "messages": [{"role": "user", "content": ask}]});
            if stream {
                b["stream_options"] = json!({"include_usage": true});
            }
            match kind {
                Kind::Text => {}
                Kind::Tool => {
                    b["tools"] = json!([{"type": "function", "function":
                        {"name": "get_weather", "parameters": schema()}}]);
                }
                Kind::Json => b["response_format"] = json!({"type": "json_object"}),
            }
            ("/v1/chat/completions".into(), b)
        }
        Client::Messages => {
            let mut b = json!({"model": model, "max_tokens": 400, "stream": stream,
                "messages": [{"role": "user", "content": ask}]});
            match kind {
                Kind::Text => {}
                Kind::Tool => {
                    b["tools"] = json!([{"name": "get_weather", "input_schema": schema()}]);
                }
                Kind::Json => {
                    b["output_format"] = json!({"type": "json_schema", "schema": schema()});
                }
            }
            ("/v1/messages".into(), b)
        }
        Client::Generate => {
            let mut b = json!({"contents": [{"role": "user", "parts": [{"text": ask}]}],
                "generationConfig": {"maxOutputTokens": 400}});
            match kind {
                Kind::Text => {}
                Kind::Tool => {
                    b["tools"] = json!([{"functionDeclarations":
                        [{"name": "get_weather", "parameters": schema()}]}]);
                }
                Kind::Json => {
                    b["generationConfig"]["responseMimeType"] = json!("application/json");
                }
            }
            let method = if stream {
                "streamGenerateContent?alt=sse"
            } else {
                "generateContent"
            };
            (format!("/v1beta/models/{model}:{method}"), b)
        }
    }
}

/// The JSON data of each SSE event.
fn data(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        .collect()
}

fn read_chat(stream: bool, text: &str) -> Said {
    let mut s = Said::default();
    let chunks = if stream {
        data(text)
    } else {
        vec![serde_json::from_str(text).unwrap()]
    };
    for c in &chunks {
        let choice = &c["choices"][0];
        let m = if stream {
            &choice["delta"]
        } else {
            &choice["message"]
        };
        s.text.push_str(m["content"].as_str().unwrap_or_default());
        if let Some(call) = m["tool_calls"].get(0) {
            let (name, args) = s.tool.get_or_insert_with(Default::default);
            name.push_str(call["function"]["name"].as_str().unwrap_or_default());
            args.push_str(call["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(u) = c["usage"].as_object() {
            s.input_tokens = u["prompt_tokens"].as_u64().unwrap();
            s.output_tokens = u["completion_tokens"].as_u64().unwrap();
        }
    }
    s
}

fn read_messages(stream: bool, text: &str) -> Said {
    let mut s = Said::default();
    if !stream {
        let m: Value = serde_json::from_str(text).unwrap();
        assert_eq!(m["type"], "message", "{m}");
        for b in m["content"].as_array().unwrap() {
            match b["type"].as_str() {
                Some("text") => s.text.push_str(b["text"].as_str().unwrap()),
                Some("tool_use") => {
                    s.tool = Some((b["name"].as_str().unwrap().into(), b["input"].to_string()));
                }
                _ => {}
            }
        }
        s.input_tokens = m["usage"]["input_tokens"].as_u64().unwrap();
        s.output_tokens = m["usage"]["output_tokens"].as_u64().unwrap();
        return s;
    }
    let events = data(text);
    assert_eq!(events.first().unwrap()["type"], "message_start");
    assert_eq!(events.last().unwrap()["type"], "message_stop");
    for e in &events {
        match e["type"].as_str() {
            Some("content_block_start") if e["content_block"]["type"] == "tool_use" => {
                s.tool = Some((
                    e["content_block"]["name"].as_str().unwrap().into(),
                    String::new(),
                ));
            }
            Some("content_block_delta") => {
                let d = &e["delta"];
                s.text.push_str(d["text"].as_str().unwrap_or_default());
                if let (Some(j), Some((_, args))) = (d["partial_json"].as_str(), s.tool.as_mut()) {
                    args.push_str(j);
                }
            }
            Some("message_start") => {
                s.input_tokens = e["message"]["usage"]["input_tokens"].as_u64().unwrap();
            }
            Some("message_delta") => {
                if let Some(i) = e["usage"]["input_tokens"].as_u64() {
                    s.input_tokens = i;
                }
                s.output_tokens = e["usage"]["output_tokens"].as_u64().unwrap();
            }
            _ => {}
        }
    }
    s
}

fn read_generate(stream: bool, text: &str) -> Said {
    let mut s = Said::default();
    let chunks = if stream {
        data(text)
    } else {
        vec![serde_json::from_str(text).unwrap()]
    };
    for c in &chunks {
        for p in c["candidates"][0]["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            s.text.push_str(p["text"].as_str().unwrap_or_default());
            if let Some(f) = p.get("functionCall") {
                s.tool = Some((f["name"].as_str().unwrap().into(), f["args"].to_string()));
            }
        }
        if let Some(u) = c.get("usageMetadata") {
            s.input_tokens = u["promptTokenCount"].as_u64().unwrap_or_default();
            s.output_tokens = u["candidatesTokenCount"].as_u64().unwrap_or_default();
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_reaches_every_provider_in_every_mode() {
    let mut h = Harness::with(sim_config(), config).await;
    let mut cells = 0;
    for client in [Client::Chat, Client::Messages, Client::Generate] {
        for (model, upstream) in MODELS {
            for stream in [false, true] {
                for kind in [Kind::Text, Kind::Tool, Kind::Json] {
                    let cell = format!("{client:?} → {model}, stream {stream}, {kind:?}");
                    let before = h.sim.stats().model(upstream);
                    let (path, body) = request(client, model, kind, stream);
                    let res = h.post(&path, &body).bearer_auth(ACME).send().await.unwrap();
                    let status = res.status();
                    let text = res.text().await.unwrap();
                    assert_eq!(status, StatusCode::OK, "{cell}: {text}");
                    let said = match client {
                        Client::Chat => read_chat(stream, &text),
                        Client::Messages => read_messages(stream, &text),
                        Client::Generate => read_generate(stream, &text),
                    };
                    assert!(
                        said.input_tokens > 0 && said.output_tokens > 0,
                        "{cell}: {said:?}"
                    );
                    // The client reads the provider's own count.
                    let after = h.sim.stats().model(upstream);
                    let served = (
                        after.tokens_in - before.tokens_in,
                        after.tokens_out - before.tokens_out,
                    );
                    assert_eq!(
                        served,
                        (said.input_tokens, said.output_tokens),
                        "{cell}: {said:?}"
                    );
                    match kind {
                        Kind::Text => assert!(!said.text.trim().is_empty(), "{cell}: {said:?}"),
                        Kind::Tool => {
                            let (name, args) = said
                                .tool
                                .as_ref()
                                .unwrap_or_else(|| panic!("{cell}: {said:?}"));
                            assert_eq!(name, "get_weather", "{cell}");
                            let args: Value = serde_json::from_str(args).unwrap();
                            assert!(args["city"].is_string(), "{cell}: {args}");
                        }
                        Kind::Json => {
                            let doc: Value = serde_json::from_str(&said.text)
                                .unwrap_or_else(|e| panic!("{cell}: {e}: {said:?}"));
                            assert!(doc.is_object(), "{cell}: {doc}");
                            assert!(said.tool.is_none(), "{cell}: {said:?}");
                        }
                    }
                    cells += 1;
                }
            }
        }
    }
    assert_eq!(cells, 54);
    h.shutdown().await;
    let store = LedgerStore::open(h.data_dir.join("ledger.db"))
        .await
        .unwrap();
    let t = store.totals(0, i64::MAX, None).await.unwrap();
    let stats = h.sim.stats();
    let (p, c) = MODELS.iter().fold((0, 0), |(p, c), (_, m)| {
        let s = stats.model(m);
        (p + s.tokens_in, c + s.tokens_out)
    });
    assert_eq!(t.records, 54);
    assert_eq!(
        (t.prompt_tokens, t.completion_tokens),
        (p, c),
        "the ledger holds what the sim served"
    );
}
