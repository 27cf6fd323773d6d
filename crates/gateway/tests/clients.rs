//! Anthropic Messages clients (`/v1/messages`) calling a model of every
//! provider through the gateway, against the sim on 127.0.0.1: OpenAI's
//! and Gemini's models answer by translation, Anthropic's as they are;
//! streams follow Anthropic's event sequence; tool calls and their
//! results go both ways; the tenant's key may come as `x-api-key`; the
//! ledger records the tokens the sim served.

mod common;

use common::{ACME, Harness, sim_config, two_tenants};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, ProviderConfig, WireFormat};
use sluice_ledger::LedgerStore;

/// A model of each provider, and its name at the sim.
const MODELS: [(&str, &str); 3] = [
    ("openai/gpt-4o-mini", "gpt-4o-mini"),
    ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
    ("google/gemini-2.5-flash", "gemini-2.5-flash"),
];

/// `google/…` on the sim's native Gemini API, and two tenants.
fn config(c: &mut Config) {
    let anthropic = c.providers.iter().find(|p| p.name == "anthropic").unwrap();
    let sim = anthropic
        .base_url
        .trim_end_matches("/anthropic/v1")
        .to_owned();
    let gemini = ProviderConfig {
        name: "google".into(),
        base_url: format!("{sim}/google/v1beta"),
        format: WireFormat::Gemini,
        ..anthropic.clone()
    };
    c.providers.retain(|p| p.name != "google");
    c.providers.push(gemini);
    two_tenants(c);
}

fn ask(model: &str) -> Value {
    json!({
        "model": model,
        "max_tokens": 6,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Say hello"}],
    })
}

async fn messages(h: &Harness, body: &Value) -> reqwest::Response {
    h.post("/v1/messages", body)
        .header("x-api-key", ACME)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_answers_a_messages_client() {
    let h = Harness::with(sim_config(), config).await;
    for (model, upstream) in MODELS {
        let res = messages(&h, &ask(model)).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let m: Value = res.json().await.unwrap();
        assert_eq!(m["type"], "message", "{model}: {m}");
        assert_eq!(m["role"], "assistant");
        assert_eq!(m["model"], upstream);
        assert_eq!(m["content"][0]["type"], "text");
        let words = m["content"][0]["text"]
            .as_str()
            .unwrap()
            .split_whitespace()
            .count();
        assert_eq!(words, 6, "{model}: {m}");
        assert_eq!(m["stop_reason"], "max_tokens", "{model}");
        let u = &m["usage"];
        assert_eq!(u["output_tokens"], 6, "{model}: {u}");
        assert!(u["input_tokens"].as_u64().unwrap() > 0, "{model}: {u}");
        let seen = h.sim.stats().model(upstream);
        assert_eq!((seen.requests, seen.ok), (1, 1), "{model}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_may_come_as_x_api_key_or_bearer_and_is_checked() {
    let h = Harness::with(sim_config(), config).await;
    let body = ask(MODELS[0].0);
    let bearer = h
        .post("/v1/messages", &body)
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
    for (name, value) in [("x-api-key", "wrong"), ("x-goog-api-key", "wrong")] {
        let res = h
            .post("/v1/messages", &body)
            .header(name, value)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{name}");
    }
    let none = h.post("/v1/messages", &body).send().await.unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    let text = none.text().await.unwrap();
    assert!(text.contains("x-api-key"), "{text}");
    let goog = h
        .post("/v1/chat/completions", &common::chat(MODELS[0].0))
        .header("x-goog-api-key", ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(goog.status(), StatusCode::OK);
    let query = h
        .post(
            &format!("/v1/chat/completions?key={ACME}"),
            &common::chat(MODELS[0].0),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(query.status(), StatusCode::OK);
    h.stop().await;
}

/// The (event, data) pairs of an Anthropic stream.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            let mut event = String::new();
            let mut data = Value::Null;
            for line in e.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(v).unwrap();
                }
            }
            assert_eq!(data["type"], event.as_str(), "{e}");
            (event, data)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_follow_anthropics_event_sequence_for_every_provider() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        let mut body = ask(model);
        body["stream"] = json!(true);
        let res = messages(&h, &body).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let ct = res.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        let ev = events(&res.text().await.unwrap());
        let names: Vec<&str> = ev
            .iter()
            .map(|(e, _)| e.as_str())
            .filter(|e| *e != "ping")
            .collect();
        assert_eq!(names.first(), Some(&"message_start"), "{model}: {names:?}");
        assert_eq!(names[1], "content_block_start", "{model}");
        assert_eq!(
            &names[names.len() - 3..],
            ["content_block_stop", "message_delta", "message_stop"]
        );
        let text: String = ev
            .iter()
            .filter_map(|(_, d)| d["delta"]["text"].as_str())
            .collect();
        assert_eq!(text.split_whitespace().count(), 6, "{model}: {text:?}");
        let delta = &ev.iter().find(|(e, _)| e == "message_delta").unwrap().1;
        assert_eq!(delta["delta"]["stop_reason"], "max_tokens", "{model}");
        assert_eq!(delta["usage"]["output_tokens"], 6, "{model}");
    }
    h.stop().await;
}

fn tools_body(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 100,
        "stream": stream,
        "tools": [{"name": "get_weather", "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"]}}],
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_their_results_go_both_ways() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        let res = messages(&h, &tools_body(model, false)).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let m: Value = res.json().await.unwrap();
        assert_eq!(m["stop_reason"], "tool_use", "{model}: {m}");
        let call = m["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
            .unwrap()
            .clone();
        assert_eq!(call["name"], "get_weather");
        assert!(call["input"]["city"].is_string(), "{model}: {call}");

        // Streamed: the call's arguments arrive as `input_json_delta`s.
        let res = messages(&h, &tools_body(model, true)).await;
        let ev = events(&res.text().await.unwrap());
        let start = ev
            .iter()
            .find(|(_, d)| d["content_block"]["type"] == "tool_use")
            .unwrap_or_else(|| panic!("{model}: a tool_use block in {ev:?}"));
        assert_eq!(start.1["content_block"]["name"], "get_weather");
        let json: String = ev
            .iter()
            .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
            .collect();
        let input: Value = serde_json::from_str(&json).unwrap();
        assert!(input["city"].is_string(), "{model}: {json}");
        let delta = &ev.iter().find(|(e, _)| e == "message_delta").unwrap().1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use", "{model}");

        // The result goes back, and the model answers in text.
        let mut body = tools_body(model, false);
        let turns = body["messages"].as_array_mut().unwrap();
        turns.push(json!({"role": "assistant", "content": [call.clone()]}));
        turns.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call["id"], "content": "sunny"}]}));
        let res = messages(&h, &body).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let m: Value = res.json().await.unwrap();
        assert_eq!(m["content"][0]["type"], "text", "{model}: {m}");
        assert_ne!(m["stop_reason"], "tool_use");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_provider_cannot_take_is_a_400_naming_it() {
    let h = Harness::with(sim_config(), config).await;
    let mut body = ask("google/gemini-2.5-flash");
    body["top_k"] = json!(5);
    let res = messages(&h, &body).await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let text = res.text().await.unwrap();
    assert!(text.contains("top_k") && text.contains("Gemini"), "{text}");
    assert_eq!(h.sim.stats().model("gemini-2.5-flash").requests, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_records_the_tokens_the_sim_served() {
    let mut h = Harness::with(sim_config(), config).await;
    for (model, _) in MODELS {
        for stream in [false, true] {
            let mut body = ask(model);
            body["stream"] = json!(stream);
            let res = messages(&h, &body).await;
            assert_eq!(res.status(), StatusCode::OK);
            res.text().await.unwrap();
        }
    }
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
    assert_eq!(t.records, 6);
    assert_eq!((t.prompt_tokens, t.completion_tokens), (p, c));
}

/// Gemini clients: `generateContent` and its stream for every provider.
#[path = "clients/gemini.rs"]
mod gemini;

/// Every client format × every provider × plain/stream × text/tool/JSON.
#[path = "clients/matrix.rs"]
mod matrix;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_reach_anthropic_and_gemini_models() {
    let h = Harness::with(sim_config(), config).await;
    for (model, _) in &MODELS[1..] {
        let body = json!({"model": model, "input": "Say hello", "instructions": "Be brief.",
            "max_output_tokens": 6});
        let res = h
            .post("/v1/responses", &body)
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        let r: Value = res.json().await.unwrap();
        assert_eq!(r["object"], "response", "{model}: {r}");
        assert_eq!(
            r["status"], "incomplete",
            "{model}: cut at max_output_tokens"
        );
        let text = r["output"][0]["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.split_whitespace().count(), 6, "{model}: {r}");
        assert_eq!(r["usage"]["output_tokens"], 6, "{model}");

        let mut body = tools_body(model, true);
        body.as_object_mut().unwrap().remove("messages");
        body.as_object_mut().unwrap().remove("max_tokens");
        body["input"] = json!("Weather in Paris?");
        body["tools"] = json!([{"type": "function", "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
        let res = h
            .post("/v1/responses", &body)
            .bearer_auth(ACME)
            .send()
            .await
            .unwrap();
        let ev = events(&res.text().await.unwrap());
        let names: Vec<&str> = ev.iter().map(|(e, _)| e.as_str()).collect();
        assert_eq!(
            &names[..2],
            ["response.created", "response.in_progress"],
            "{model}"
        );
        assert_eq!(
            names.last(),
            Some(&"response.completed"),
            "{model}: {names:?}"
        );
        let done = &ev.last().unwrap().1["response"];
        let call = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["type"] == "function_call")
            .unwrap_or_else(|| panic!("{model}: {done}"));
        assert_eq!(call["name"], "get_weather");
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert!(args["city"].is_string(), "{model}: {call}");
        assert!(
            done["usage"]["output_tokens"].as_u64().unwrap() > 0,
            "{model}"
        );
    }
    // What no other provider has is a 400 naming it.
    let body = json!({"model": MODELS[2].0, "input": "x", "previous_response_id": "resp_1"});
    let res = h
        .post("/v1/responses", &body)
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("previous_response_id"));
    h.stop().await;
}
