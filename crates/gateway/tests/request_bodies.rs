//! Bodies in the request log (issue 38): with `[request_log] bodies`, a
//! call's request and response are kept with its ledger record, redacted
//! and cut at `max_body_bytes`, and shown at `GET /v1/requests/{id}` to
//! its own tenant and at `/v1/requests/all/{id}` to the operator; never
//! to another tenant. With `errors`, only failed calls keep them.

mod common;

use common::{ACME, GLOBEX, Harness, expect_error, sim_config, two_tenants, wait_for};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{BodiesKept, Config};
use sluice_sim::{Faults, ModelConfig, SimConfig};

const ADMIN: &str = "admin-secret";
/// A key-shaped secret a careless agent put in its prompt.
const LEAKED: &str = "sk-live-0123456789abcdefghij";

fn config(keep: BodiesKept) -> impl FnOnce(&mut Config) {
    move |c: &mut Config| {
        two_tenants(c);
        c.admin_token = Some(ADMIN.into());
        c.request_log.bodies = keep;
        c.request_log.max_body_bytes = 600;
    }
}

/// The sim with a model whose every call fails.
fn sim() -> SimConfig {
    let mut sim = sim_config();
    sim.models.insert(
        "gpt-4.1-nano".into(),
        ModelConfig {
            faults: Some(Faults {
                error_rate: 1.0,
                error_statuses: vec![500],
                ..Faults::default()
            }),
            ..ModelConfig::default()
        },
    );
    sim.models.insert(
        "gpt-4o".into(),
        ModelConfig {
            output_tokens: Some(400),
            ..ModelConfig::default()
        },
    );
    sim
}

fn ask(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "stream": stream,
        "messages": [{"role": "user", "content": format!("my key is {LEAKED}, keep it")}],
    })
}

/// The request log's row of request `rid` as `token` sees it, once the
/// ledger has written it.
async fn row(h: &Harness, token: &str, rid: &str) -> Value {
    wait_for(&format!("request {rid} in the log"), || async {
        let log = h
            .get_json(&format!("/v1/requests?request_id={rid}"), token)
            .await;
        log["requests"].as_array()?.first().cloned()
    })
    .await
}

async fn call(h: &Harness, rid: &str, body: &Value) -> StatusCode {
    let res = h
        .post("/v1/chat/completions", body)
        .bearer_auth(ACME)
        .header("x-request-id", rid)
        .send()
        .await
        .expect("the gateway answers");
    let status = res.status();
    res.bytes().await.expect("the whole answer");
    status
}

#[tokio::test]
async fn bodies_are_kept_redacted_cut_and_shown_to_their_tenant_only() {
    let h = Harness::with(sim(), config(BodiesKept::All)).await;
    assert_eq!(
        call(&h, "whole-1", &ask("openai/gpt-4o-mini", false)).await,
        200
    );
    assert_eq!(call(&h, "stream-1", &ask("openai/gpt-4o", true)).await, 200);

    let whole = row(&h, ACME, "whole-1").await;
    let id = whole["id"].as_i64().unwrap();
    assert!(whole.get("bodies").is_none(), "a page carries no bodies");
    let one = h.get_json(&format!("/v1/requests/{id}"), ACME).await;
    assert_eq!(one["request_id"], "whole-1");
    let b = &one["bodies"];
    let request = b["request"].as_str().unwrap();
    assert!(!request.contains(LEAKED), "{request}");
    assert!(
        request.contains("my key is [redacted], keep it"),
        "{request}"
    );
    assert_eq!(b["request_truncated"], false);
    let response: Value = serde_json::from_str(b["response"].as_str().unwrap())
        .expect("a whole JSON answer is kept whole");
    assert_eq!(response["object"], "chat.completion");
    assert_eq!(b["response_truncated"], false);

    // The stream: its SSE events as the client got them, cut at the cap.
    let streamed = row(&h, ACME, "stream-1").await;
    let sid = streamed["id"].as_i64().unwrap();
    let s = h.get_json(&format!("/v1/requests/{sid}"), ACME).await;
    let response = s["bodies"]["response"].as_str().unwrap();
    assert!(response.starts_with("data: {"), "{response}");
    assert!(response.ends_with("…[truncated]"), "{response}");
    assert!(response.len() <= 600 + "…[truncated]".len());
    assert_eq!(s["bodies"]["response_truncated"], true);
    assert!(s["bodies"]["response_bytes"].as_u64().unwrap() > 600);

    // Another tenant: as if it did not exist. The operator sees it.
    let res = h
        .get(&format!("/v1/requests/{id}"))
        .bearer_auth(GLOBEX)
        .send()
        .await
        .unwrap();
    expect_error(res, 404, "not_found").await;
    let admin = h.get_json(&format!("/v1/requests/all/{id}"), ADMIN).await;
    assert_eq!(admin["bodies"], one["bodies"]);
    assert_eq!(admin["tenant"], "acme");
    // A tenant's key is not the operator's.
    let res = h
        .get(&format!("/v1/requests/all/{id}"))
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    // An id that is not one is named.
    let res = h
        .get("/v1/requests/first")
        .bearer_auth(ACME)
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 400, "invalid_request").await;
    assert_eq!(e["param"], "id", "{e}");
    h.stop().await;
}

#[tokio::test]
async fn with_errors_only_failed_calls_keep_their_bodies() {
    let h = Harness::with(sim(), config(BodiesKept::Errors)).await;
    assert_eq!(
        call(&h, "fine", &ask("openai/gpt-4o-mini", false)).await,
        200
    );
    let failed = call(&h, "broken", &ask("openai/gpt-4.1-nano", false)).await;
    assert!(failed.is_server_error(), "{failed}");

    let fine = row(&h, ACME, "fine").await;
    let one = h
        .get_json(&format!("/v1/requests/{}", fine["id"]), ACME)
        .await;
    assert_eq!(
        one["bodies"],
        Value::Null,
        "a call that went well keeps none"
    );

    let broken = row(&h, ACME, "broken").await;
    let one = h
        .get_json(&format!("/v1/requests/{}", broken["id"]), ACME)
        .await;
    let b = &one["bodies"];
    assert!(b["request"].as_str().unwrap().contains("[redacted]"), "{b}");
    let error: Value = serde_json::from_str(b["response"].as_str().unwrap()).unwrap();
    assert!(error["error"]["message"].is_string(), "{b}");
    h.stop().await;
}
