//! OpenAI clients calling Anthropic and native Gemini models through
//! `/v1/chat/completions`: the gateway translates the request, the answer,
//! the stream and errors, against the sim on 127.0.0.1.

mod common;

use common::{Harness, expect_error, header, sim_config, sse_data};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, ProviderConfig, WireFormat};
use sluice_sim::SimConfig;

const CLAUDE: &str = "anthropic/claude-sonnet-4-5";
const GEMINI: &str = "google/gemini-2.5-flash";

/// `google/…` on the sim's native Gemini API.
fn native_gemini(c: &mut Config) {
    let anthropic = c.providers.iter().find(|p| p.name == "anthropic").unwrap();
    let sim = anthropic
        .base_url
        .trim_end_matches("/anthropic/v1")
        .to_owned();
    c.providers.push(ProviderConfig {
        name: "google".into(),
        base_url: format!("{sim}/google/v1beta"),
        format: WireFormat::Gemini,
        ..anthropic.clone()
    });
}

async fn harness() -> Harness {
    Harness::with(sim_config(), native_gemini).await
}

fn ask(model: &str, max_tokens: u64) -> Value {
    json!({
        "model": model,
        "messages": [
            {"role": "system", "content": "Be brief and kind to the reader."},
            {"role": "user", "content": "Say hello"},
        ],
        "max_tokens": max_tokens,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_is_answered_in_openai_shape_by_both() {
    let h = harness().await;
    for (model, upstream, provider) in [
        (CLAUDE, "claude-sonnet-4-5", "anthropic"),
        (GEMINI, "gemini-2.5-flash", "google"),
    ] {
        let res = h.send("/v1/chat/completions", &ask(model, 5)).await;
        assert_eq!(res.status(), StatusCode::OK, "{model}");
        assert!(header(&res, "content-type").starts_with("application/json"));
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["object"], "chat.completion", "{body}");
        assert_eq!(body["model"], upstream);
        let choice = &body["choices"][0];
        assert_eq!(choice["message"]["role"], "assistant");
        let text = choice["message"]["content"].as_str().unwrap();
        assert_eq!(text.split_whitespace().count(), 5, "{text:?}");
        assert_eq!(choice["finish_reason"], "length");
        let usage = &body["usage"];
        let (p, c) = (
            usage["prompt_tokens"].as_u64().unwrap(),
            usage["completion_tokens"].as_u64().unwrap(),
        );
        // The system message went upstream: 32 + 9 characters, 4 a token.
        assert_eq!((p, c), (11, 5), "{model}: {usage}");
        assert_eq!(usage["total_tokens"].as_u64().unwrap(), p + c);
        let seen = h.sim.stats().model(upstream);
        assert_eq!((seen.requests, seen.ok), (1, 1), "{model}");
        assert_eq!(seen.provider.as_deref(), Some(provider));

        let res = h.send("/v1/chat/completions", &ask(model, 4_000)).await;
        let body: Value = res.json().await.unwrap();
        assert_eq!(body["choices"][0]["finish_reason"], "stop", "{model}");
    }
    h.stop().await;
}

/// The chunks of a stream, which must end with `[DONE]`.
async fn read_chunks(h: &Harness, body: &Value) -> Vec<Value> {
    let res = h.send("/v1/chat/completions", body).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(header(&res, "content-type").starts_with("text/event-stream"));
    let text = res.text().await.unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{text}");
    data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_become_chat_chunks_with_usage_last_when_asked() {
    let h = harness().await;
    for model in [CLAUDE, GEMINI] {
        let mut body = ask(model, 6);
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let chunks = read_chunks(&h, &body).await;
        assert!(
            chunks
                .iter()
                .all(|c| c["object"] == "chat.completion.chunk")
        );
        let id = &chunks[0]["id"];
        assert!(chunks.iter().all(|c| &c["id"] == id), "one id: {chunks:?}");
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let (last, rest) = chunks.split_last().unwrap();
        assert_eq!(last["choices"], json!([]), "{model}: usage chunk last");
        assert_eq!(last["usage"]["completion_tokens"], 6);
        assert_eq!(last["usage"]["prompt_tokens"], 11);
        assert!(rest.iter().all(|c| c["usage"].is_null()));
        let text: String = rest
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text.split_whitespace().count(), 6, "{model}: {text:?}");
        let finishes: Vec<&Value> = rest
            .iter()
            .map(|c| &c["choices"][0]["finish_reason"])
            .filter(|f| !f.is_null())
            .collect();
        assert_eq!(finishes, [&json!("length")], "{model}");

        // Not asked: no usage chunk, and no usage field at all.
        body["stream_options"] = json!({"include_usage": false});
        let chunks = read_chunks(&h, &body).await;
        assert!(chunks.iter().all(|c| c.get("usage").is_none()), "{model}");
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "length"
        );
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_conversations_are_carried_over() {
    let h = harness().await;
    for model in [CLAUDE, GEMINI] {
        let body = json!({
            "model": model,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\":\"clear\"}"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "weather", "description": "The weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            }}],
            "tool_choice": "auto",
            "stop": ["\n\n"],
            "temperature": 0.2,
        });
        let res = h.send("/v1/chat/completions", &body).await;
        assert_eq!(
            res.status(),
            StatusCode::OK,
            "{model}: {}",
            res.text().await.unwrap()
        );
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_translated_is_a_400_naming_the_field() {
    let h = harness().await;
    let image = json!({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}});
    for (model, extra, param) in [
        (CLAUDE, json!({"n": 2}), "n"),
        (CLAUDE, json!({"logit_bias": {"50256": -100}}), "logit_bias"),
        (CLAUDE, json!({"seed": 4}), "seed"),
        (
            CLAUDE,
            json!({"response_format": {"type": "json_object"},
                "tools": [{"type": "function", "function": {"name": "f"}}]}),
            "response_format",
        ),
        (GEMINI, json!({"audio": {"voice": "alloy"}}), "audio"),
        (
            GEMINI,
            json!({"messages": [{"role": "user", "content": [image]}]}),
            "messages",
        ),
        (
            GEMINI,
            json!({"messages": [{"role": "critic", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            GEMINI,
            json!({"tools": [{"type": "web_search"}]}),
            "tools[0].type",
        ),
    ] {
        let mut body = ask(model, 5);
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let res = h.send("/v1/chat/completions", &body).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{model} {extra}");
        let e: Value = res.json().await.unwrap();
        assert_eq!(e["error"]["param"], param, "{model}: {e}");
    }
    assert_eq!(h.sim.stats().model("claude-sonnet-4-5").requests, 0);
    assert_eq!(h.sim.stats().model("gemini-2.5-flash").requests, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_come_back_in_openai_shape() {
    // The sim wants a key the gateway does not have: both refuse, each in
    // its own shape, and the client reads OpenAI's.
    let sim = SimConfig {
        api_key: Some("sk-only".into()),
        ..sim_config()
    };
    let h = Harness::with(sim, native_gemini).await;
    for (model, code) in [
        (CLAUDE, "authentication_error"),
        (GEMINI, "UNAUTHENTICATED"),
    ] {
        let res = h.send("/v1/chat/completions", &ask(model, 5)).await;
        let e = expect_error(res, 401, code).await;
        assert_eq!(e["type"], "authentication_error", "{model}");
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_messages_still_pass_through() {
    let h = harness().await;
    let body =
        json!({"model": CLAUDE, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]});
    let res = h.send("/v1/messages", &body).await;
    assert_eq!(res.status(), StatusCode::OK);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["type"], "message");
    // Gemini answers Responses clients by translation.
    let res = h
        .send("/v1/responses", &json!({"model": GEMINI, "input": "hi"}))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let r: Value = res.json().await.unwrap();
    assert_eq!(r["object"], "response", "{r}");
    // Embeddings have no translation: a 400 naming the model.
    let res = h
        .send("/v1/embeddings", &json!({"model": GEMINI, "input": "hi"}))
        .await;
    let e: Value = res.json().await.unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another wire format"),
        "{e}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_lists_what_the_gateway_routes() {
    let h = Harness::with(sim_config(), |c| {
        native_gemini(c);
        c.fallbacks
            .insert("openai/gpt-4o".into(), vec![CLAUDE.into(), GEMINI.into()]);
    })
    .await;
    let res = h.get("/v1/models").send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let list: Value = res.json().await.unwrap();
    assert_eq!(list["object"], "list");
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    // Real models (the configuration's and the price table's), not
    // wildcards, for providers with known models.
    for id in ["openai/gpt-4o", "openai/gpt-4o-mini", CLAUDE, GEMINI] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    for id in ["openai/*", "anthropic/*", "google/*"] {
        assert!(!ids.contains(&id), "{id} in {ids:?}");
    }
    let one: Value = h
        .get("/v1/models/openai/gpt-4o-mini")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one["id"], "openai/gpt-4o-mini");
    assert_eq!(one["owned_by"], "openai");
    let none = h.get("/v1/models/nobody/x").send().await.unwrap();
    assert_eq!(none.status(), StatusCode::NOT_FOUND);
    let gemini = &list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == GEMINI)
        .unwrap();
    assert_eq!(gemini["owned_by"], "google");
    assert_eq!(gemini["format"], "gemini");
    h.stop().await;
}

/// The upstream drops a translated stream after two events: the client
/// reads an OpenAI error event and no `[DONE]`, and nothing is resent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_translated_stream_cut_upstream_ends_with_an_openai_error() {
    let h = harness().await;
    let cut = sluice_sim::Faults {
        disconnect_every: Some(1),
        disconnect_after_chunks: 2,
        ..sluice_sim::Faults::none()
    };
    for (model, upstream) in [
        ("anthropic/claude-cut", "claude-cut"),
        ("google/gemini-cut", "gemini-cut"),
    ] {
        h.sim
            .set_faults(sluice_sim::Scope::Model(upstream.into()), cut.clone())
            .unwrap();
        let mut body = ask(model, 50);
        body["stream"] = json!(true);
        let res = h.send("/v1/chat/completions", &body).await;
        assert_eq!(res.status(), StatusCode::OK);
        let text = res.text().await.unwrap();
        let data = sse_data(&text);
        assert!(!data.iter().any(|d| d == "[DONE]"), "{model}: {text}");
        let e: Value = serde_json::from_str(data.last().unwrap()).unwrap();
        assert_eq!(e["error"]["code"], "upstream_error", "{model}: {text}");
        let seen = h.sim.stats().model(upstream);
        assert_eq!((seen.requests, seen.disconnects), (1, 1), "{model}");
    }
    h.stop().await;
}
