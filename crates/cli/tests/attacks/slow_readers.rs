//! Slow readers (issue 33 High 4, issue 34 item 6): streams whose client
//! never reads held their pool slot, grant and upstream connection past
//! their deadline, because the deadline was checked only when the body
//! was polled, and the body is polled only while the client reads. 64
//! such streams from one tenant held every slot of the model pool, and
//! another tenant's call to another model waited out its deadline (504).
//! Proxied bodies had no deadline at all.
//!
//! Now: a tenant holds at most its share of a pool
//! (`bulkheads.{pool}.max_per_tenant`, half by default), the request's
//! deadline is kept by a watchdog outside the body, and a connection
//! whose client takes no bytes for `http.write_timeout_ms` is closed.
//! The never-reading clients here are raw sockets with a 4 KiB receive
//! buffer that read nothing at all.

use std::time::Instant;

use serde_json::json;
use sluice_sim::{ModelConfig, SimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::gateway::{Gateway, PATIENCE, chat, client, sim, wait_until};

const MALLORY: &str = "sk-attacks-mallory";
const VICTIM: &str = "sk-attacks-victim";

/// Two tenants (keys inline), and `http` settings.
fn tenants(http: &str) -> String {
    format!(
        r#"[[tenants]]
name = "mallory"
api_key = "{MALLORY}"

[[tenants]]
name = "victim"
api_key = "{VICTIM}"

[http]
{http}
"#
    )
}

/// What the flood model writes when asked: 6,000 tokens, about 1.1 MB
/// of events, far more than the buffers between the gateway and a client
/// that reads nothing can take ([`never_reading`]): such a stream
/// blocks.
const FLOOD_TOKENS: u32 = 6_000;

/// A model that writes [`FLOOD_TOKENS`] when asked.
fn flood_sim() -> SimConfig {
    let mut config = SimConfig::unlimited();
    config.defaults.max_tokens = FLOOD_TOKENS;
    config.models.insert(
        "flood".into(),
        ModelConfig {
            output_tokens: Some(FLOOD_TOKENS),
            ..ModelConfig::default()
        },
    );
    config
}

/// A streamed call of the flood model, asking for all it writes.
fn flood() -> Vec<u8> {
    let mut flood = chat("openai/flood", true);
    flood["max_tokens"] = json!(FLOOD_TOKENS);
    serde_json::to_vec(&flood).unwrap()
}

/// Reads what `s` holds and what comes until the stream says how it
/// ended (`[DONE]`, or the `deadline_exceeded` event), the connection
/// closes, or [`PATIENCE`] passes: the text read.
async fn drain(s: &mut TcpStream) -> String {
    let mut text = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let end = Instant::now() + PATIENCE;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(n)) => text.extend_from_slice(&buf[..n]),
        }
        let tail = &text[text.len().saturating_sub(4_096)..];
        if contains(tail, b"[DONE]") || contains(tail, b"deadline_exceeded") {
            break;
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Sends `request` (a whole HTTP/1.1 request) on a socket that reads
/// nothing: a 4 KiB receive buffer and 536-byte segments (`TCP_MAXSEG`,
/// so that the gateway's side of the connection sizes its send buffer
/// for small segments, as across the internet, rather than loopback's
/// 64 KiB ones: what the buffers between the two can hold is then about
/// half a megabyte, far less than the streams here).
async fn never_reading(port: u16, request: Vec<u8>) -> TcpStream {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("a socket");
    socket.set_recv_buffer_size(4_096).expect("SO_RCVBUF");
    socket.set_tcp_mss(536).expect("TCP_MAXSEG");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    socket.connect(&addr.into()).expect("connects");
    socket.set_nonblocking(true).expect("non-blocking");
    let mut s = TcpStream::from_std(socket.into()).expect("a tokio stream");
    s.write_all(&request).await.expect("the request is sent");
    s
}

/// A POST of `body` as JSON to `path` with the tenant's `key` and a
/// deadline of `timeout_ms`.
fn post(path: &str, key: &str, timeout_ms: u64, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\nx-sluice-timeout-ms: {timeout_ms}\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn port_of(gw: &Gateway) -> u16 {
    gw.url.rsplit(':').next().unwrap().parse().unwrap()
}

/// The model pool's slots held and waiters, from `/metrics`.
async fn pool(gw: &Gateway, name: &str) -> (f64, f64) {
    let in_use = gw
        .gauge(&format!("sluice_bulkhead_in_use{{pool=\"{name}\"}}"))
        .await
        .unwrap_or(0.0);
    let waiting = gw
        .gauge(&format!("sluice_bulkhead_waiting{{pool=\"{name}\"}}"))
        .await
        .unwrap_or(0.0);
    (in_use, waiting)
}

/// 64 never-reading streams from one tenant do not make another
/// tenant's call to another model wait out its deadline: it is answered
/// 200 while they hold their share of the model pool (32 streaming, the
/// others waiting). At their deadline (40 s) the watchdog ends them, the
/// write timeout being far away, and every slot comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_reading_streams_do_not_starve_another_tenant() {
    let sim = sim(flood_sim()).await;
    let gw = Gateway::start("slow-readers", &sim, &tenants("write_timeout_ms = 600000"));
    let port = port_of(&gw);
    let mut held = Vec::new();
    for _ in 0..64 {
        let request = post("/v1/chat/completions", MALLORY, 40_000, &flood());
        held.push(never_reading(port, request).await);
    }
    wait_until("mallory holds its share of the model pool", || async {
        pool(&gw, "model").await.0 >= 32.0
    })
    .await;
    let (in_use, waiting) = pool(&gw, "model").await;
    println!("mallory holds {in_use} model slots, {waiting} of its calls wait for its share");
    assert_eq!(in_use, 32.0, "never more than its share");

    let started = Instant::now();
    let res = client()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(VICTIM)
        .header("x-sluice-timeout-ms", "60000")
        .json(&chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .expect("the gateway answers");
    let latency = started.elapsed();
    let status = res.status();
    let body = res.text().await.unwrap_or_default();
    println!("the victim's call: {status} after {latency:?}, with 64 slow readers holding streams");
    assert_eq!(status, 200, "{body}");

    // Nobody reads; the deadline passes: every slot comes back, and the
    // streams were cut there, not finished (what the first one holds ends
    // with the deadline's event).
    wait_until("the model pool is empty again", || async {
        pool(&gw, "model").await == (0.0, 0.0)
    })
    .await;
    let text = drain(&mut held[0]).await;
    assert!(
        text.contains("deadline_exceeded") && !text.contains("[DONE]"),
        "cut at the deadline: {} bytes, ends {:?}",
        text.len(),
        &text[text.len().saturating_sub(300)..]
    );
}

/// A connection whose client takes no bytes is closed after
/// `http.write_timeout_ms`, however far its deadline: its slot comes
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_takes_no_bytes_is_closed() {
    let sim = sim(flood_sim()).await;
    let gw = Gateway::start("unread-write", &sim, &tenants("write_timeout_ms = 2000"));
    let port = port_of(&gw);
    let mut held = Vec::new();
    for _ in 0..4 {
        let request = post("/v1/chat/completions", MALLORY, 600_000, &flood());
        held.push(never_reading(port, request).await);
    }
    wait_until("the streams reach the upstream", || async {
        sim.stats().model("flood").requests >= 4
    })
    .await;
    wait_until(
        "the model pool is empty after the write timeout",
        || async { pool(&gw, "model").await == (0.0, 0.0) },
    )
    .await;
    // Closed, not finished: what was on its way, then the end.
    let text = drain(&mut held[0]).await;
    assert!(!text.contains("[DONE]"), "cut, {} bytes", text.len());
}

/// A stream whose client never reads ends at its deadline even though
/// the write timeout is far away: the watchdog releases its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_nobody_reads_ends_at_its_deadline() {
    let sim = sim(flood_sim()).await;
    let gw = Gateway::start(
        "unread-deadline",
        &sim,
        &tenants("write_timeout_ms = 600000"),
    );
    let port = port_of(&gw);
    let mut held = Vec::new();
    for _ in 0..4 {
        let request = post("/v1/chat/completions", MALLORY, 10_000, &flood());
        held.push(never_reading(port, request).await);
    }
    wait_until("the streams reach the upstream", || async {
        sim.stats().model("flood").requests >= 4
    })
    .await;
    wait_until("the model pool is empty at the deadline", || async {
        pool(&gw, "model").await == (0.0, 0.0)
    })
    .await;
    for s in &mut held {
        let text = drain(s).await;
        assert!(
            text.contains("deadline_exceeded") && !text.contains("[DONE]"),
            "cut at the deadline: {} bytes, ends {:?}",
            text.len(),
            &text[text.len().saturating_sub(300)..]
        );
    }
}

/// A proxied body whose client never reads ends at the request's
/// deadline: before, proxied bodies had none. The API here is the
/// simulator's OpenAI endpoint, proxied as any API: its flood stream is a
/// body far larger than the buffers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_body_nobody_reads_ends_at_its_deadline() {
    let sim = sim(flood_sim()).await;
    let api = format!(
        "{}\n[[apis]]\nname = \"llm\"\nbase_url = \"{}/openai/v1\"\n\
         requests_per_second = 100000.0\nburst = 100000\n\
         auth_env = \"OPENAI_API_KEY\"\n",
        tenants("write_timeout_ms = 600000"),
        sim.url()
    );
    let gw = Gateway::start("unread-proxy", &sim, &api);
    let port = port_of(&gw);
    let mut body: serde_json::Value = serde_json::from_slice(&flood()).unwrap();
    body["model"] = json!("flood");
    let body = serde_json::to_vec(&body).unwrap();
    let mut held = Vec::new();
    for _ in 0..4 {
        let request = post("/proxy/llm/chat/completions", MALLORY, 10_000, &body);
        held.push(never_reading(port, request).await);
    }
    wait_until("the calls reach the API", || async {
        sim.stats().model("flood").requests >= 4
    })
    .await;
    wait_until("the api pool is empty at the deadline", || async {
        pool(&gw, "api").await == (0.0, 0.0)
    })
    .await;
    // Broken off, not finished.
    let text = drain(&mut held[0]).await;
    assert!(!text.contains("[DONE]"), "cut, {} bytes", text.len());
    drop(held);
    // And the gateway still answers.
    let ok = client()
        .post(format!("{}/proxy/llm/chat/completions", gw.url))
        .bearer_auth(VICTIM)
        .json(&chat("flood", false))
        .send()
        .await
        .expect("answers");
    assert_eq!(ok.status(), 200);
}
