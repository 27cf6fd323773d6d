//! The latency `/mcp` adds to a tool call: the same open-loop stream of
//! `tools/call` (100 calls/s by default) straight to the sim's MCP server
//! and through a gateway in front of it, side by side in one run (one
//! second of each in turn, so that both sides see the same machine), each
//! call timed from its due time (no coordinated omission). Every due time
//! of both sides is a whole number of milliseconds from one origin, so
//! that the timer's millisecond ticks make both sides equally late (a
//! slice's own origin would put each slice at a random point between two
//! ticks, up to a millisecond apart). The sim's
//! limits are off and the gateway's API limit never binds, so what differs
//! is the gateway's path: admission, the limiter, the pool, the ledger
//! record and the second hop.
//!
//! ```sh
//! cargo run --profile bench -p sluice-gateway --example mcp_latency -- 100 10
//! ```
//! (calls/s, seconds per side).

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use sluice_gateway::Gateway;
use sluice_gateway::config::{Config, McpServerConfig};
use sluice_sim::{Sim, SimConfig};
use tokio::time::Instant;

type Client = Arc<RunningService<RoleClient, ()>>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rate: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100.0);
    let secs: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let local = "127.0.0.1:0".parse().expect("an address");
    let sim = Sim::start(SimConfig::unlimited(), local)
        .await
        .expect("the sim");
    let dir = std::env::temp_dir().join(format!("sluice-mcp-latency-{}", std::process::id()));
    let mut config = Config {
        data_dir: dir.clone(),
        ..Config::default()
    };
    config.trace.enabled = false;
    for api in &mut config.apis {
        api.base_url = format!("{}/{}", sim.url(), api.name);
        api.requests_per_second = 100_000.0;
        api.burst = 100_000;
    }
    (config.mcp_servers).push(McpServerConfig::http("sim", format!("{}/mcp", sim.url())));
    let gateway = Gateway::bind(config, Some(local))
        .await
        .expect("the gateway");
    let addr = gateway.local_addr();
    tokio::spawn(gateway.serve(std::future::pending::<()>()));
    let direct = connect(&format!("{}/mcp", sim.url()), &[]).await;
    let through = connect(
        &format!("http://{addr}/mcp"),
        &[("x-sluice-workspace", "bench")],
    )
    .await;
    // Warm both (connections, the gateway's upstream session).
    // Each slice starts 1.1 s after the one before: the last calls of
    // one are answered before the next begins (or its calls are late, as
    // an open loop's are).
    let step = Duration::from_millis(1_100);
    let mut at = Instant::now();
    run(&direct, rate, at, 1.0).await;
    at += step;
    run(&through, rate, at, 1.0).await;
    let (mut d, mut t) = (Vec::new(), Vec::new());
    let mut left = secs;
    while left > 0.0 {
        let slice = left.min(1.0);
        at += step;
        d.extend(run(&direct, rate, at, slice).await);
        at += step;
        t.extend(run(&through, rate, at, slice).await);
        left -= slice;
    }
    d.sort_by(f64::total_cmp);
    t.sort_by(f64::total_cmp);
    let (dp50, dp99) = (pct(&d, 0.50), pct(&d, 0.99));
    let (tp50, tp99) = (pct(&t, 0.50), pct(&t, 0.99));
    println!(
        "tools/call at {rate} calls/s for {secs} s each ({} and {} calls)",
        d.len(),
        t.len()
    );
    println!("  direct to the MCP server: p50 {dp50:.3} ms  p99 {dp99:.3} ms");
    println!("  through /mcp:             p50 {tp50:.3} ms  p99 {tp99:.3} ms");
    println!(
        "  added:                    p50 {:.3} ms  p99 {:.3} ms",
        tp50 - dp50,
        tp99 - dp99
    );
    let _ = std::fs::remove_dir_all(dir);
}

async fn connect(url: &str, headers: &[(&'static str, &str)]) -> Client {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                axum::http::HeaderName::from_static(k),
                axum::http::HeaderValue::from_str(v).expect("a header value"),
            )
        })
        .collect();
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(headers)
        .max_concurrent_requests(1_024);
    Arc::new(
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("an MCP session"),
    )
}

/// Latencies in ms of an open loop of calls at `rate` for `secs` from
/// `start`, sorted.
async fn run(client: &Client, rate: f64, start: Instant, secs: f64) -> Vec<f64> {
    let args: JsonObject = serde_json::json!({"channel": "C1", "text": "bench"})
        .as_object()
        .cloned()
        .expect("an object");
    let n = (rate * secs) as u64;
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(due).await;
        let (client, args) = (Arc::clone(client), args.clone());
        calls.spawn(async move {
            let call = CallToolRequestParams::new("SLACK_SEND_MESSAGE").with_arguments(args);
            let r = client.call_tool(call).await.expect("a result");
            assert_eq!(r.is_error, Some(false), "{r:?}");
            due.elapsed().as_secs_f64() * 1_000.0
        });
    }
    let mut out = Vec::with_capacity(n as usize);
    while let Some(ms) = calls.join_next().await {
        out.push(ms.expect("a call"));
    }
    out.sort_by(f64::total_cmp);
    out
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}
