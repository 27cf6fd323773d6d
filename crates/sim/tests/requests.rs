//! Requests the sim must refuse properly: a missing or wrong API key, bad
//! bodies (400 naming the field, in the provider's format, never a
//! panic), unknown paths; and the SaaS echo.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::SimConfig;

#[tokio::test]
async fn api_key_is_checked_the_providers_way() {
    let mut config = SimConfig::unlimited();
    config.api_key = Some("sk-sim".into());
    let sim = start(config).await;
    let chat_url = format!("{}/v1/chat/completions", sim.url());
    let msg_url = format!("{}/v1/messages", sim.url());

    let r = bare()
        .post(&chat_url)
        .json(&chat("m"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    let r = bare()
        .post(&chat_url)
        .bearer_auth("wrong")
        .json(&chat("m"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = bare()
        .post(&chat_url)
        .bearer_auth("sk-sim")
        .json(&chat("m"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Anthropic wants x-api-key, not a bearer token.
    let r = bare()
        .post(&msg_url)
        .bearer_auth("sk-sim")
        .json(&message("c"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
    let r = bare()
        .post(&msg_url)
        .header("x-api-key", "sk-sim")
        .json(&message("c"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Refused requests are logged but count against no model.
    assert_eq!(
        sim.log(0)
            .entries
            .iter()
            .filter(|e| e.status == 401)
            .count(),
        3
    );
    assert_eq!(sim.stats().model("m").requests, 1);
}

/// With no key configured the sim still wants one, the provider's way,
/// as the providers do: a gateway that forgets the key fails here first.
#[tokio::test]
async fn without_a_configured_key_any_key_is_needed_in_the_providers_header() {
    let sim = start(SimConfig::unlimited()).await;
    let url = |path: &str| format!("{}{path}", sim.url());
    let gemini = "/v1beta/models/gemini-2.0-flash:generateContent";
    let ask = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    // (path, body, headers, status)
    type Case<'a> = (&'a str, Value, Vec<(&'a str, &'a str)>, u16);
    let cases: Vec<Case> = vec![
        ("/v1/chat/completions", chat("m"), vec![], 401),
        (
            "/v1/chat/completions",
            chat("m"),
            vec![("x-api-key", "k")],
            401,
        ),
        (
            "/v1/chat/completions",
            chat("m"),
            vec![("authorization", "Bearer ")],
            401,
        ),
        (
            "/v1/chat/completions",
            chat("m"),
            vec![("authorization", "Bearer k")],
            200,
        ),
        (
            "/v1/messages",
            message("c"),
            vec![("authorization", "Bearer k")],
            401,
        ),
        ("/v1/messages", message("c"), vec![("x-api-key", "k")], 200),
        (
            gemini,
            ask.clone(),
            vec![("authorization", "Bearer k")],
            401,
        ),
        (gemini, ask.clone(), vec![("x-goog-api-key", "k")], 200),
    ];
    for (path, body, headers, want) in cases {
        let mut req = bare().post(url(path)).json(&body);
        for (name, value) in &headers {
            req = req.header(*name, *value);
        }
        let got = req.send().await.unwrap().status().as_u16();
        assert_eq!(got, want, "{path} with {headers:?}");
    }
    // Gemini's key may come in the query.
    let r = bare()
        .post(url(&format!("{gemini}?key=k")))
        .json(&ask)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn bad_bodies_are_400_naming_the_field() {
    let sim = start(SimConfig::unlimited()).await;
    let cases: &[(&str, &str, &str)] = &[
        ("/v1/chat/completions", "{", ""),
        ("/v1/chat/completions", "[]", "body"),
        ("/v1/chat/completions", r#"{"messages":[]}"#, "model"),
        ("/v1/chat/completions", r#"{"model":1}"#, "model"),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":"hi"}"#,
            "messages",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[]}"#,
            "messages",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"content":"x"}]}"#,
            "messages[0].role",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"user","content":5}]}"#,
            "messages[0].content",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"user","content":[7]}]}"#,
            "messages[0].content[0]",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"u","content":"x"}],"max_tokens":0}"#,
            "max_tokens",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"u","content":"x"}],"stream":"yes"}"#,
            "stream",
        ),
        (
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"u","content":"x"}],"stream_options":{"include_usage":1}}"#,
            "stream_options.include_usage",
        ),
        ("/v1/embeddings", r#"{"model":"m"}"#, "input"),
        (
            "/v1/embeddings",
            r#"{"model":"m","input":[1,"a"]}"#,
            "input",
        ),
        (
            "/v1/embeddings",
            r#"{"model":"m","input":"a","dimensions":100000}"#,
            "dimensions",
        ),
        (
            "/v1/embeddings",
            r#"{"model":"m","input":"a","encoding_format":"hex"}"#,
            "encoding_format",
        ),
        // OpenAI's reasoning models take `max_completion_tokens` only.
        (
            "/v1/chat/completions",
            r#"{"model":"o3-mini","messages":[{"role":"u","content":"x"}],"max_tokens":5}"#,
            "max_tokens",
        ),
        ("/v1/responses", r#"{"model":"m","input":5}"#, "input"),
        (
            "/v1/responses",
            r#"{"model":"m","input":"x","max_output_tokens":-1}"#,
            "max_output_tokens",
        ),
    ];
    for (path, body, field) in cases {
        let r = post_raw(&sim, path, body).await;
        assert_eq!(r.status(), 400, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{body}");
        if !field.is_empty() {
            assert_eq!(v["error"]["param"], *field, "{body}");
        }
    }
    let anthropic: &[(&str, &str)] = &[
        (r#"{"model":"c","max_tokens":5}"#, "messages"),
        (
            r#"{"model":"c","max_tokens":5,"messages":[{"role":"user","content":"x"}],"system":7}"#,
            "system",
        ),
        ("not json", "could not parse"),
    ];
    for (body, start) in anthropic {
        let r = post_raw(&sim, "/v1/messages", body).await;
        assert_eq!(r.status(), 400, "{body}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["type"], "error");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with(start),
            "{v}"
        );
    }
    // Nothing above reached a model.
    assert!(sim.stats().models.is_empty());
}

#[tokio::test]
async fn strange_bodies_never_break_the_sim() {
    let sim = start(SimConfig::unlimited()).await;
    let bodies = [
        "",
        "null",
        "0",
        "\"s\"",
        "{}",
        "{\"model\":null}",
        "{\"model\":\"\"}",
        "\u{0}",
        r#"{"model":"m","messages":[null]}"#,
        r#"{"model":"m","input":[[]]}"#,
        r#"{"model":"m","input":[]}"#,
        r#"{"model":"m","max_tokens":1e99,"messages":[{"role":"u","content":"x"}]}"#,
        r#"{"model":"m","max_tokens":18446744073709551615,"messages":[{"role":"u","content":"x"}]}"#,
    ];
    for path in [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/embeddings",
        "/v1/responses",
        "/openai/v1/responses",
    ] {
        for body in bodies {
            let r = post_raw(&sim, path, body).await;
            assert!(
                r.status() == 200 || r.status() == 400,
                "{path} {body}: {}",
                r.status()
            );
            r.json::<Value>().await.unwrap();
        }
    }
    let r = client()
        .get(format!("{}/v1/chat/completions", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let r = client()
        .post(format!("{}/v1/nothing", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["type"],
        "invalid_request_error"
    );
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("still-fine")).await,
        200
    );
}

#[tokio::test]
async fn apis_echo_any_method_and_unknown_ones_are_404() {
    let sim = start(SimConfig::default()).await;
    let body: Value = bare()
        .post(format!("{}/github/repos/o/r/issues", sim.url()))
        .json(&json!({"title": "bug"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body,
        json!({"ok": true, "api": "github", "method": "POST", "path": "/repos/o/r/issues", "echo": {"title": "bug"}, "authorization": null})
    );
    // The credential received is echoed, for tests of who sent which.
    let r = client()
        .get(format!("{}/slack/auth.test", sim.url()))
        .bearer_auth("xoxb-acme")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<Value>().await.unwrap()["authorization"],
        "Bearer xoxb-acme"
    );
    let r = client()
        .delete(format!("{}/google_calendar/events/9", sim.url()))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["method"].as_str(), body["echo"].is_null()),
        (Some("DELETE"), true)
    );
    let r = client()
        .put(format!("{}/slack/x", sim.url()))
        .body("plain text")
        .send()
        .await
        .unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["echo"], "plain text");
    let r = client()
        .get(format!("{}/myspace/friends", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = client()
        .get(format!("{}/", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(sim.stats().apis.len(), 3);
}
