//! The latency `/mcp` adds to a tool call: the same open-loop stream of
//! `tools/call` (100 calls/s by default) straight to the sim's MCP server,
//! through a bare HTTP forwarder in front of it, and through a gateway in
//! front of it, side by side in one run (one second of each in turn, so
//! that all three see the same machine), each call timed from its due
//! time (no coordinated omission). The forwarder relays each request's
//! bytes to the sim and the answer's back without reading them: what it
//! adds is what any proxy on this machine pays (a second connection, two
//! more socket reads and writes, its own HTTP parsing), the floor of what
//! `/mcp` can add. Every due time
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
//! (calls/s, seconds per side; a third argument, `direct`, `forwarder`
//! or `mcp`, runs that side alone, to profile it).

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
    // One side alone (`direct`, `forwarder` or `mcp`), to profile it.
    let only = args.next();
    if let Some(o) = &only
        && !["direct", "forwarder", "mcp"].contains(&o.as_str())
    {
        eprintln!("the third argument names one side: direct, forwarder or mcp (not {o:?})");
        std::process::exit(2);
    }
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
    let relay = forwarder(sim.url()).await;
    let relayed = connect(&format!("http://{relay}/mcp"), &[]).await;
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
    let all = [
        ("direct", "direct to the MCP server", &direct),
        ("forwarder", "through a bare forwarder", &relayed),
        ("mcp", "through /mcp", &through),
    ];
    let sides: Vec<_> = match only.as_deref() {
        None => all.to_vec(),
        Some(o) => all.into_iter().filter(|(key, ..)| *key == o).collect(),
    };
    for (.., side) in &sides {
        run(side, rate, at, 1.0).await;
        at += step;
    }
    let mut took = vec![Vec::new(); sides.len()];
    let mut left = secs;
    while left > 0.0 {
        let slice = left.min(1.0);
        for ((.., side), took) in sides.iter().zip(&mut took) {
            took.extend(run(side, rate, at, slice).await);
            at += step;
        }
        left -= slice;
    }
    println!("tools/call at {rate} calls/s for {secs} s per side");
    let mut p50s = Vec::new();
    for ((_, name, _), mut took) in sides.iter().zip(took) {
        took.sort_by(f64::total_cmp);
        let (p50, p99) = (pct(&took, 0.50), pct(&took, 0.99));
        println!(
            "  {name:<25} p50 {p50:.3} ms  p99 {p99:.3} ms  ({} calls)",
            took.len()
        );
        p50s.push((p50, p99));
    }
    if let [(dp50, dp99), (fp50, fp99), (tp50, tp99)] = p50s[..] {
        println!(
            "  added by the forwarder:   p50 {:.3} ms  p99 {:.3} ms",
            fp50 - dp50,
            fp99 - dp99
        );
        let ratio = if fp50 > dp50 {
            format!("{:.1}x the forwarder's p50", (tp50 - dp50) / (fp50 - dp50))
        } else {
            "the forwarder's p50 is within the noise".into()
        };
        println!(
            "  added by /mcp:            p50 {:.3} ms  p99 {:.3} ms  ({ratio})",
            tp50 - dp50,
            tp99 - dp99,
        );
    }
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

/// A bare HTTP forwarder on 127.0.0.1 in front of `upstream` (a base
/// URL): each request's method, path, headers and body go there as they
/// came, and the answer's status, headers and body (streamed) come back
/// as they came. Both legs keep their connections alive with
/// `TCP_NODELAY`, as the gateway's do.
async fn forwarder(upstream: String) -> std::net::SocketAddr {
    use axum::serve::ListenerExt;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = listener.local_addr().expect("an address");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    // On a thread and runtime of its own, as each of the gateway's serving
    // threads is: a call crosses the same threads through either.
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let client = reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .expect("an HTTP client");
            let listener = tokio::net::TcpListener::from_std(listener)
                .expect("a listener")
                .tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
            let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
                relay(client.clone(), upstream.clone(), req)
            });
            let _ = axum::serve(listener, app).await;
        });
    });
    addr
}

/// Headers that belong to one connection, not to the request.
const HOP_BY_HOP: [&str; 4] = ["connection", "keep-alive", "transfer-encoding", "host"];

async fn relay(
    client: reqwest::Client,
    upstream: String,
    req: axum::extract::Request,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
    // The request's bytes as they came (its size is its sender's: the
    // benchmark's own calls).
    let Ok(body) = axum::body::to_bytes(body, 1 << 20).await else {
        return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, "over 1 MiB").into_response();
    };
    let sent = client
        .request(parts.method, format!("{upstream}{path}"))
        .headers(headers)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) => {
            let mut answer = axum::http::Response::from(answer);
            for h in HOP_BY_HOP {
                answer.headers_mut().remove(h);
            }
            answer.map(axum::body::Body::new)
        }
        Err(e) => (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
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
