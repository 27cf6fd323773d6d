//! Injected faults: every Nth server error, dropped connections, hangs,
//! forced 429s, and flipping them at runtime.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use sluice_sim::{ApiConfig, Faults, ModelConfig, Scope, SimConfig};

fn with_model_faults(model: &str, faults: Faults) -> SimConfig {
    let mut config = SimConfig::unlimited();
    config.models.insert(
        model.into(),
        ModelConfig {
            faults: Some(faults),
            ..Default::default()
        },
    );
    config
}

#[tokio::test]
async fn every_third_request_fails_with_rotating_statuses() {
    let faults = Faults {
        error_every: Some(3),
        ..Faults::default()
    };
    let sim = start(with_model_faults("gpt-4o", faults)).await;
    let mut statuses = Vec::new();
    for _ in 0..9 {
        let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o")).await;
        let status = r.status().as_u16();
        if status >= 500 {
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["type"], "server_error");
        }
        statuses.push(status);
    }
    assert_eq!(statuses, [200, 200, 500, 200, 200, 502, 200, 200, 503]);
    let c = sim.stats().model("gpt-4o");
    assert_eq!(
        (c.requests, c.ok, c.server_errors, c.admitted),
        (9, 6, 3, 9)
    );
    // Anthropic's shape for the same fault.
    let sim = start(with_model_faults(
        "c",
        Faults {
            error_every: Some(1),
            error_statuses: vec![529],
            ..Faults::default()
        },
    ))
    .await;
    let r = post(&sim, "/v1/messages", &message("c")).await;
    assert_eq!(r.status(), 529);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error");
}

// Several threads: the cut must not depend on the client being polled
// in step with the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnect_mid_stream_after_k_chunks() {
    let faults = Faults {
        disconnect_every: Some(2),
        disconnect_after_chunks: 3,
        ..Faults::default()
    };
    let sim = start(with_model_faults("gpt-4o", faults)).await;
    let mut req = chat("gpt-4o");
    req["stream"] = json!(true);
    let (_, failed) = read_body(post(&sim, "/v1/chat/completions", &req).await).await;
    assert!(!failed, "the first request is whole");
    let r = post(&sim, "/v1/chat/completions", &req).await;
    assert_eq!(r.status(), 200);
    let (text, failed) = read_body(r).await;
    assert!(failed, "the connection must drop");
    let events = parse_sse(&text);
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.data != "[DONE]"));
    let c = sim.stats().model("gpt-4o");
    assert_eq!((c.disconnects, c.ok), (1, 2));
    assert_eq!(c.tokens_out, 24, "a cut stream delivers no counted output");
}

#[tokio::test]
async fn disconnect_cuts_whole_bodies_and_api_answers() {
    let mut config = with_model_faults(
        "m",
        Faults {
            disconnect_every: Some(1),
            ..Faults::default()
        },
    );
    config.apis.insert(
        "slack".into(),
        ApiConfig {
            faults: Faults {
                disconnect_every: Some(1),
                ..Faults::default()
            },
            ..Default::default()
        },
    );
    let sim = start(config).await;
    let r = post(&sim, "/v1/chat/completions", &chat("m")).await;
    assert_eq!(r.status(), 200);
    assert!(r.json::<Value>().await.is_err(), "half a body is not JSON");
    let (_, failed) = read_body(post(&sim, "/slack/x", &json!({})).await).await;
    assert!(failed);
    assert_eq!(sim.stats().api("slack").disconnects, 1);
}

#[tokio::test]
async fn malformed_answers_are_whole_on_the_wire_but_broken_inside() {
    let mut config = with_model_faults(
        "m",
        Faults {
            malformed_every: Some(1),
            ..Faults::default()
        },
    );
    config.apis.insert(
        "slack".into(),
        ApiConfig {
            faults: Faults {
                malformed_every: Some(1),
                ..Faults::default()
            },
            ..Default::default()
        },
    );
    let sim = start(config).await;
    let r = post(&sim, "/v1/chat/completions", &chat("m")).await;
    assert_eq!(r.status(), 200);
    let (text, failed) = read_body(r).await;
    assert!(!failed, "the body arrives whole");
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    let mut req = chat("m");
    req["stream"] = json!(true);
    let (text, failed) = read_body(post(&sim, "/v1/chat/completions", &req).await).await;
    assert!(!failed, "the stream ends as usual");
    assert!(text.contains("this is not an event"), "{text}");
    let events = parse_sse(&text);
    assert!(
        events
            .iter()
            .any(|e| e.data != "[DONE]" && serde_json::from_str::<Value>(&e.data).is_err())
    );
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let (text, failed) = read_body(post(&sim, "/slack/x", &json!({})).await).await;
    assert!(!failed);
    assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    let c = sim.stats().model("m");
    assert_eq!((c.malformed, c.ok, c.tokens_out), (2, 2, 0));
    assert_eq!(sim.stats().api("slack").malformed, 1);
}

#[tokio::test]
async fn a_hang_outlasts_the_client_timeout() {
    let sim = start(with_model_faults(
        "m",
        Faults {
            hang_every: Some(1),
            ..Faults::default()
        },
    ))
    .await;
    let _ = common::client(); // installs the crypto provider
    let client = reqwest::Client::builder()
        .default_headers(common::keys())
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let err = client
        .post(format!("{}/v1/chat/completions", sim.url()))
        .json(&chat("m"))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert_eq!(sim.stats().model("m").hangs, 1);
    // Shutdown cuts the hang short rather than waiting ten minutes.
    sim.shutdown().await;
}

#[tokio::test]
async fn forced_429_and_runtime_flips() {
    let sim = start(SimConfig::unlimited()).await;
    let set = |body: Value| {
        let url = format!("{}/_sim/faults", sim.url());
        async move {
            client()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(set(json!({"model": "gpt-4o", "faults": {"force_429": true, "force_429_retry_after_ms": 2500}})).await, 200);
    let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o")).await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after").unwrap(), "3");
    assert_eq!(header(&r, "retry-after-ms").unwrap(), "2500");
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["type"],
        "rate_limit_error"
    );
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o-mini")).await,
        200
    );

    // Every model and API at once, then back to normal.
    assert_eq!(
        set(json!({"faults": {"error_every": 1, "error_statuses": [502]}})).await,
        200
    );
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o-mini")).await,
        502
    );
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("brand-new")).await,
        502
    );
    assert_eq!(status_of(&sim, "/gmail/send", &json!({})).await, 502);
    assert_eq!(set(json!({"faults": {}})).await, 200);
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o")).await,
        200
    );

    // The same through the handle.
    sim.set_faults(
        Scope::Api("gmail".into()),
        Faults {
            force_429: true,
            ..Faults::default()
        },
    )
    .unwrap();
    assert_eq!(status_of(&sim, "/gmail/send", &json!({})).await, 429);
    assert!(
        sim.set_faults(Scope::Api("nope".into()), Faults::default())
            .is_err()
    );
}
