//! The sim's MCP server at `/mcp`, spoken to with the official SDK's
//! client over Streamable HTTP: the seed's tool names, each limited and
//! counted as its API, a rate-limit error result over the limit, and
//! arguments checked by name. Rates are tiny so that nothing refills
//! during a test: the assertions count, they never time.

mod common;

use common::*;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use sluice_sim::{Limits, Scope, SimConfig, SimHandle};

async fn connect(sim: &SimHandle) -> RunningService<RoleClient, ()> {
    let _ = client(); // installs the crypto provider reqwest needs
    let transport = StreamableHttpClientTransport::from_uri(format!("{}/mcp", sim.url()));
    ().serve(transport).await.unwrap()
}

fn email() -> JsonObject {
    let Some(args) = json!({"recipient_email": "a@example.com", "subject": "hi", "body": "hello"})
        .as_object()
        .cloned()
    else {
        unreachable!()
    };
    args
}

#[tokio::test]
async fn tools_are_the_seed_agents_and_limited_as_their_api() {
    let sim = start(SimConfig::default()).await;
    sim.set_limits(
        Scope::Api("gmail".into()),
        Limits::per_second(0.001).burst(2),
    )
    .unwrap();
    let mcp = connect(&sim).await;
    let tools = mcp.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for name in [
        "GMAIL_SEND_EMAIL",
        "SLACK_SEND_MESSAGE",
        "GITHUB_CREATE_ISSUE",
        "LINEAR_CREATE_ISSUE",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let call = || CallToolRequestParams::new("GMAIL_SEND_EMAIL").with_arguments(email());
    for _ in 0..2 {
        let r = mcp.call_tool(call()).await.unwrap();
        assert_eq!(r.is_error, Some(false), "{r:?}");
        let body = r.structured_content.unwrap();
        assert_eq!(body["api"], "gmail");
        assert_eq!(body["echo"]["subject"], "hi");
    }
    let r = mcp.call_tool(call()).await.unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let body = r.structured_content.clone().unwrap();
    assert_eq!(body["status"], 429);
    assert!(body["retry_after_ms"].as_u64().unwrap() > 0, "{body}");
    let text = format!("{:?}", r.content);
    assert!(text.contains("429 Too Many Requests"), "{text}");
    let gmail = sim.stats().api("gmail");
    assert_eq!((gmail.requests, gmail.ok, gmail.rate_limited), (3, 2, 1));
    // Another API's tool has its own limit.
    let slack = CallToolRequestParams::new("SLACK_SEND_MESSAGE").with_arguments(
        json!({"channel": "C1", "text": "hello"})
            .as_object()
            .cloned()
            .unwrap(),
    );
    let r = mcp.call_tool(slack).await.unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(sim.stats().api("slack").ok, 1);
    mcp.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_calls_are_protocol_errors_naming_what_is_wrong() {
    let sim = start(SimConfig::default()).await;
    let mcp = connect(&sim).await;
    let err = mcp
        .call_tool(CallToolRequestParams::new("GMAIL_SEND_EMAIL"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("recipient_email"), "{err}");
    let err = mcp
        .call_tool(CallToolRequestParams::new("WEB_SEARCH"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("WEB_SEARCH"), "{err}");
    // Refused before the API: nothing counted.
    assert_eq!(sim.stats().api("gmail").requests, 0);
    mcp.cancel().await.unwrap();
}

#[tokio::test]
async fn injected_faults_are_error_results_with_the_status() {
    let sim = start(SimConfig::default()).await;
    let faults: sluice_sim::Faults = serde_json::from_value(json!({"error_every": 1})).unwrap();
    sim.set_faults(Scope::Api("gmail".into()), faults).unwrap();
    let mcp = connect(&sim).await;
    let r = mcp
        .call_tool(CallToolRequestParams::new("GMAIL_SEND_EMAIL").with_arguments(email()))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let status = r.structured_content.unwrap()["status"].as_u64().unwrap();
    assert!((500..600).contains(&status), "{status}");
    mcp.cancel().await.unwrap();
}
