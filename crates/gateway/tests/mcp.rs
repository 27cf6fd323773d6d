//! `/mcp`: the sim's MCP server behind the gateway, spoken to with the
//! official SDK's client over Streamable HTTP. Tool calls are traffic
//! like any other: paced to their API's limit (the `api:{api}` resource
//! `/proxy/{api}` uses), queued fairly across tenants, recorded in the
//! ledger; allow-lists hide tools.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{ACME, GLOBEX, Harness, sim_config, two_tenants};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;
use sluice_gateway::config::{Config, McpServerConfig};
use sluice_sim::{Limits, Scope};
use tokio::time::Instant;

type Client = RunningService<RoleClient, ()>;

/// The sim's MCP server as `[[mcp_servers]]` entry `sim`.
fn sim_server(c: &mut Config) {
    let base = c.api("gmail").expect("gmail").base_url.clone();
    let sim = base.trim_end_matches("/gmail");
    c.mcp_servers.push(McpServerConfig {
        name: "sim".into(),
        url: Some(format!("{sim}/mcp")),
        command: None,
        headers: Default::default(),
        env: Default::default(),
        api: None,
        tools: Default::default(),
        connect_timeout_ms: 5_000,
    });
}

/// A client of the gateway's `/mcp` sending `headers`.
async fn connect(h: &Harness, headers: &[(&'static str, String)]) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let headers: HashMap<_, _> = headers
        .iter()
        .map(|(k, v)| {
            (
                axum::http::HeaderName::from_static(k),
                axum::http::HeaderValue::from_str(v).unwrap(),
            )
        })
        .collect();
    let config =
        StreamableHttpClientTransportConfig::with_uri(h.url("/mcp")).custom_headers(headers);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("the gateway's MCP endpoint initializes")
}

fn bearer(key: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {key}"))
}

fn email() -> CallToolRequestParams {
    let args: JsonObject =
        json!({"recipient_email": "a@example.com", "subject": "hi", "body": "x"})
            .as_object()
            .cloned()
            .unwrap();
    CallToolRequestParams::new("GMAIL_SEND_EMAIL").with_arguments(args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_are_listed_and_called_through_the_gateway() {
    let h = Harness::with(sim_config(), sim_server).await;
    let mcp = connect(&h, &[("x-sluice-workspace", "w1".into())]).await;
    let tools = mcp.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"GMAIL_SEND_EMAIL"), "{names:?}");
    assert!(names.contains(&"LINEAR_CREATE_ISSUE"), "{names:?}");
    let r = mcp.call_tool(email()).await.unwrap();
    assert_eq!(r.is_error, Some(false), "{r:?}");
    assert_eq!(r.structured_content.unwrap()["api"], "gmail");
    // `{server}.{tool}` names the same tool.
    let mut explicit = email();
    explicit.name = "sim.GMAIL_SEND_EMAIL".into();
    assert_eq!(mcp.call_tool(explicit).await.unwrap().is_error, Some(false));
    assert_eq!(h.sim.stats().api("gmail").ok, 2);
    // An unknown tool is the client's error, naming it.
    let err = mcp
        .call_tool(CallToolRequestParams::new("NOPE_TOOL"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("NOPE_TOOL"), "{err}");
    // The metrics count the calls under the API (the recorder is the
    // process's: other tests add to it).
    let metrics = h.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_mcp_tool_calls_total")
                && l.contains("api=\"gmail\"")
                && l.contains("status=\"200\"")),
        "{metrics}"
    );
    // Each call left a `tool` record in the ledger.
    let store = sluice_ledger::LedgerStore::open(h.data_dir.join("ledger.db"))
        .await
        .expect("the ledger file");
    let records = common::wait_for("the tool records", || {
        let store = &store;
        async move {
            let r = store.records("w1", 0, 1_000).await.ok()?;
            (r.len() >= 2).then_some(r)
        }
    })
    .await;
    for (_, r) in &records {
        assert_eq!(
            (
                r.kind.as_str(),
                r.provider.as_str(),
                r.model.as_str(),
                r.endpoint.as_str(),
                r.status
            ),
            ("tool", "gmail", "sim.GMAIL_SEND_EMAIL", "/mcp", 200),
            "{r:?}"
        );
    }
    mcp.cancel().await.unwrap();
    h.stop().await;
}

/// The proof: 12 calls at once of a Gmail tool whose API allows
/// 2/s with a burst of 5 all succeed, none refused by the sim, and they
/// cannot all have gone in less than (12 - 5) / 2 = 3.5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_paced_to_the_apis_limit() {
    let mut sim = sim_config();
    sim.apis.get_mut("gmail").unwrap().limits = Limits::per_second(2.0).burst(5);
    let h = Harness::with(sim, |c| {
        sim_server(c);
        let gmail = c.apis.iter_mut().find(|a| a.name == "gmail").unwrap();
        gmail.requests_per_second = 2.0;
        gmail.burst = 5;
        // As shipped: the limiter's margin for network jitter and its
        // evidence policy (the base config turns both off to count cuts).
        // The margin as wide as it may grow: this machine is shared, and a
        // call held back 50 ms on its way to the sim beats the sim's
        // refill as a jittery network would.
        let shipped = Config::default().adaptive;
        c.adaptive.policy = shipped.policy;
        c.adaptive.jitter_margin_ms = shipped.max_jitter_margin_ms;
    })
    .await;
    let mcp = Arc::new(connect(&h, &[("x-sluice-workspace", "w1".into())]).await);
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let mcp = Arc::clone(&mcp);
        calls.spawn(async move { mcp.call_tool(email()).await });
    }
    while let Some(r) = calls.join_next().await {
        let r = r.unwrap().expect("a result");
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    let took = started.elapsed();
    let gmail = h.sim.stats().api("gmail");
    assert_eq!((gmail.ok, gmail.rate_limited), (12, 0), "{gmail:?}");
    assert!(took >= Duration::from_millis(3_400), "{took:?}");
    h.stop().await;
}

/// Two tenants each send 50 calls at once to one API: while both wait,
/// the queue alternates between them, so each has about half of the
/// first 50 done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_share_an_api_fairly() {
    let h = Harness::with(sim_config(), |c| {
        sim_server(c);
        two_tenants(c);
        let gmail = c.apis.iter_mut().find(|a| a.name == "gmail").unwrap();
        gmail.requests_per_second = 25.0;
        gmail.burst = 1;
    })
    .await;
    let done = Arc::new(AtomicUsize::new(0));
    let mut calls = tokio::task::JoinSet::new();
    for key in [ACME, GLOBEX] {
        let mcp = Arc::new(connect(&h, &[bearer(key)]).await);
        for _ in 0..50 {
            let (mcp, done) = (Arc::clone(&mcp), Arc::clone(&done));
            calls.spawn(async move {
                let r = mcp.call_tool(email()).await.expect("a result");
                assert_eq!(r.is_error, Some(false), "{r:?}");
                (key, done.fetch_add(1, Ordering::SeqCst))
            });
        }
    }
    let mut first_half = HashMap::new();
    while let Some(r) = calls.join_next().await {
        let (key, order) = r.unwrap();
        if order < 50 {
            *first_half.entry(key).or_insert(0u32) += 1;
        }
    }
    let (a, g) = (first_half[ACME], first_half[GLOBEX]);
    assert!(a.abs_diff(g) <= 5, "acme {a}, globex {g} of the first 50");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_list_hides_tools_and_refuses_them_by_name() {
    let h = Harness::with(sim_config(), |c| {
        sim_server(c);
        two_tenants(c);
        c.tenants[1].mcp = Some(vec!["sim.SLACK_*".into()]);
    })
    .await;
    let globex = connect(&h, &[bearer(GLOBEX)]).await;
    let names: Vec<String> = (globex.list_all_tools().await.unwrap().iter())
        .map(|t| t.name.to_string())
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("SLACK_")),
        "{names:?}"
    );
    let err = globex.call_tool(email()).await.unwrap_err().to_string();
    assert!(
        err.contains("allow-list") && err.contains("globex"),
        "{err}"
    );
    assert_eq!(h.sim.stats().api("gmail").requests, 0);
    // The other tenant sees and calls it.
    let acme = connect(&h, &[bearer(ACME)]).await;
    assert_eq!(acme.call_tool(email()).await.unwrap().is_error, Some(false));
    // Without a key, nothing.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let res = h
        .http
        .post(h.url("/mcp"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    h.stop().await;
}

/// A tool result saying 429 is the API refusing: the gateway's limiter
/// for that API is told (its capacity cut, the resource paused), and the
/// call is tried again once the API may take it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_rate_limit_feeds_the_apis_limiter() {
    let h = Harness::with(sim_config(), sim_server).await;
    // The sim refuses every gmail call; the gateway's own limit is high.
    h.sim
        .set_limits(
            Scope::Api("gmail".into()),
            Limits::per_second(0.001).burst(1),
        )
        .unwrap();
    let mcp = connect(&h, &[("x-sluice-workspace", "w1".into())]).await;
    assert_eq!(mcp.call_tool(email()).await.unwrap().is_error, Some(false));
    let r = mcp.call_tool(email()).await.unwrap();
    assert_eq!(r.is_error, Some(true), "{r:?}");
    assert_eq!(r.structured_content.unwrap()["status"], 429);
    let metrics = h.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_upstream_429_total")
                && l.contains("resource=\"api:gmail\"")),
        "{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("sluice_limiter_capacity_changes_total")
                && l.contains("api:gmail")),
        "{metrics}"
    );
    h.stop().await;
}
