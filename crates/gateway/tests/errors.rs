//! Every way a request can be wrong, each answered with the right status
//! and an OpenAI-style body `{"error":{"type","message","code"}}` that
//! names what is wrong; none of them reaches the sim.

mod common;

use common::{Harness, chat, expect_error, header, sim_config};
use reqwest::StatusCode;
use serde_json::json;
use sluice_gateway::config::TenantConfig;

fn untouched(h: &Harness) {
    let stats = h.sim.stats();
    assert!(
        stats.models.values().all(|c| c.requests == 0),
        "the sim saw {:?}",
        stats.models
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_a_400_that_says_so() {
    let h = Harness::start().await;
    let res = h
        .http
        .post(h.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(r#"{"model": "openai/gpt-4o", "messages": ["#)
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["type"], "invalid_request_error");
    assert!(e["message"].as_str().unwrap().contains("JSON"), "{e}");

    let res = h
        .send("/v1/chat/completions", &json!(["not", "an object"]))
        .await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(e["message"].as_str().unwrap().contains("object"), "{e}");
    untouched(&h);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_bad_model_is_a_400_naming_model() {
    let h = Harness::start().await;
    for body in [
        json!({"messages": []}),
        json!({"model": null}),
        json!({"model": 42}),
        json!({"model": ["openai/gpt-4o"]}),
        json!({"model": "  "}),
    ] {
        let res = h.send("/v1/chat/completions", &body).await;
        let e = expect_error(res, 400, "invalid_request").await;
        assert!(
            e["message"].as_str().unwrap().contains("model"),
            "{body}: {e}"
        );
        assert_eq!(e["param"], "model", "{body}: {e}");
    }
    untouched(&h);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_prefix_is_a_400_listing_the_known_ones() {
    let h = Harness::start().await;
    for model in ["mistral/large", "gpt-4o"] {
        let res = h.send("/v1/chat/completions", &chat(model)).await;
        let e = expect_error(res, 400, "invalid_request").await;
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains(model) && msg.contains("openai/"), "{msg}");
        assert_eq!(e["param"], "model");
    }
    untouched(&h);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wrong_wire_format_for_the_route_is_a_400() {
    let h = Harness::start().await;
    // Anthropic models answer chat by translation, but not embeddings.
    let embed = json!({"model": "anthropic/claude-sonnet-4-5", "input": "x"});
    let res = h.send("/v1/embeddings", &embed).await;
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(
        e["message"].as_str().unwrap().contains("/v1/messages"),
        "{e}"
    );
    // (An Anthropic Messages body reaches an OpenAI model by translation
    // since issue 37: tests/clients.rs.)
    untouched(&h);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_a_413_with_or_without_a_length() {
    let h = Harness::with(sim_config(), |c| c.max_body_bytes = 1_024).await;
    let mut big = chat("openai/gpt-4o");
    big["messages"][0]["content"] = json!("x".repeat(2_000));

    let res = h.send("/v1/chat/completions", &big).await;
    // The rest of the body is still on the connection: it must not go back
    // to the client's pool, or the next request fails on it.
    assert_eq!(header(&res, "connection"), "close");
    let e = expect_error(res, 413, "payload_too_large").await;
    assert!(e["message"].as_str().unwrap().contains("1024"), "{e}");

    // Chunked: no Content-Length to refuse up front.
    let bytes = serde_json::to_vec(&big).unwrap();
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(256).map(|c| Ok(c.to_vec())).collect();
    let res = h
        .http
        .post(h.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    expect_error(res, 413, "payload_too_large").await;

    // Just under the cap still goes through.
    let res = h.send("/v1/chat/completions", &chat("openai/gpt-4o")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(h.sim.stats().model("gpt-4o").requests, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_need_a_known_key_and_a_valid_priority() {
    let h = Harness::with(sim_config(), |c| {
        c.tenants = vec![TenantConfig::new("acme", "sk-acme")];
    })
    .await;
    let body = chat("openai/gpt-4o");

    let res = h.send("/v1/chat/completions", &body).await;
    let e = expect_error(res, 401, "invalid_api_key").await;
    assert_eq!(e["type"], "authentication_error");

    for auth in ["Bearer sk-other", "Basic c2stYWNtZQ==", "Bearer "] {
        let res = h
            .post("/v1/chat/completions", &body)
            .header("authorization", auth)
            .send()
            .await
            .unwrap();
        expect_error(res, 401, "invalid_api_key").await;
    }

    let res = h
        .post("/v1/chat/completions", &body)
        .bearer_auth("sk-acme")
        .header("x-sluice-priority", "urgent")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(
        e["message"].as_str().unwrap().contains("x-sluice-priority"),
        "{e}"
    );
    assert_eq!(e["param"], "x-sluice-priority");

    let res = h
        .post("/v1/chat/completions", &body)
        .bearer_auth("sk-acme")
        .header("x-sluice-timeout-ms", "soon")
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("x-sluice-timeout-ms"),
        "{e}"
    );

    untouched(&h);
    let res = h
        .post("/v1/chat/completions", &body)
        .bearer_auth("sk-acme")
        .header("x-sluice-priority", "high")
        .send()
        .await
        .unwrap();
    // `high` is a permission (issue 33), which acme does not have.
    let e = expect_error(res, 403, "forbidden").await;
    assert!(
        e["message"].as_str().unwrap().contains("x-sluice-priority"),
        "{e}"
    );
    let res = h
        .post("/v1/chat/completions", &body)
        .bearer_auth("sk-acme")
        .header("x-sluice-priority", "low")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_in_json() {
    let h = Harness::start().await;
    let res = h.get("/v1/nothing-here").send().await.unwrap();
    expect_error(res, 404, "not_found").await;
    let res = h.send("/v2/chat/completions", &chat("openai/gpt-4o")).await;
    expect_error(res, 404, "not_found").await;
    h.stop().await;
}

/// A known route with the wrong method is an error too, and its body must
/// be the same JSON shape as every other error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_is_405_in_json() {
    let h = Harness::start().await;
    let res = h.get("/v1/chat/completions").send().await.unwrap();
    expect_error(res, 405, "method_not_allowed").await;
    h.stop().await;
}

/// Hostile numbers (issue 17): an output limit at `u64::MAX` or a million
/// choices used to be clamped or saturated into the token estimate (and
/// sent on upstream where no tokens/min limit applied); now each is a 400
/// naming its field, and nothing reaches the sim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_numbers_are_a_400_naming_the_field() {
    let h = Harness::start().await;
    let cases = [
        (
            "/v1/chat/completions",
            "openai/gpt-4o",
            "max_tokens",
            json!(u64::MAX),
        ),
        (
            "/v1/chat/completions",
            "openai/gpt-4o",
            "n",
            json!(1_000_000),
        ),
        (
            "/v1/chat/completions",
            "openai/gpt-4o",
            "max_completion_tokens",
            json!(-1),
        ),
        (
            "/v1/chat/completions",
            "openai/gpt-4o",
            "max_tokens",
            json!(1e300),
        ),
        (
            "/v1/responses",
            "openai/gpt-4o",
            "max_output_tokens",
            json!(u64::MAX),
        ),
        (
            "/v1/messages",
            "anthropic/claude-sonnet-4-5",
            "max_tokens",
            json!(u64::MAX),
        ),
    ];
    for (path, model, field, value) in cases {
        let mut body = chat(model);
        if path == "/v1/responses" {
            body = json!({"model": model, "input": "hi"});
        }
        body[field] = value.clone();
        let res = h.send(path, &body).await;
        let e = expect_error(res, 400, "invalid_request").await;
        assert_eq!(e["param"], field, "{path} {field}={value}: {e}");
        assert!(e["message"].as_str().unwrap().contains("from 1 to"), "{e}");
    }
    untouched(&h);
    h.stop().await;
}
