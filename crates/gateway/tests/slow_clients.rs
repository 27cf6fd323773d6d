//! Clients that are slow or greedy on purpose (issue 18), on raw TCP
//! against a gateway on 127.0.0.1: a connection that trickles its request
//! head is closed after `http.header_read_timeout_ms`; connections past
//! `http.max_connections` wait and are served when others close; a body
//! is read only for a caller who may send it, within
//! `http.body_read_timeout_ms`.
//!
//! No speed is asserted: every wait has a generous bound that only stops a
//! hung test.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{ACME, Harness, sim_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The longest any step here waits before the test counts as hung.
const HUNG: Duration = Duration::from_secs(20);

/// How long a connection past the cap is watched for an answer it must not
/// get yet. Waiting longer would only make the check stronger.
const NOT_YET: Duration = Duration::from_millis(300);

/// Reads until the end of a response head (or EOF); returns it as text.
async fn read_head(s: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(HUNG, async {
        while !head.ends_with(b"\r\n\r\n") {
            match s.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => head.push(byte[0]),
            }
        }
    })
    .await
    .expect("a response head (or EOF) arrives");
    String::from_utf8_lossy(&head).into_owned()
}

/// Whether the server closed `s`: reads (and drops) until EOF or a reset.
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4_096];
    tokio::time::timeout(HUNG, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or(false)
}

fn status(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head:?}"))
}

async fn get_healthz(addr: SocketAddr) -> u16 {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    status(&read_head(&mut s).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_trickles_its_head_is_closed() {
    let h = Harness::with(sim_config(), |c| c.http.header_read_timeout_ms = 300).await;
    let mut slow = TcpStream::connect(h.addr).await.unwrap();
    // Half a head, and then nothing: slowloris.
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let closed = tokio::time::timeout(HUNG, slow.read_to_end(&mut got)).await;
    assert!(closed.is_ok(), "the server never closed the connection");
    assert!(got.is_empty(), "no answer to half a head: {got:?}");

    // A connection that says nothing at all is closed the same way.
    let mut idle = TcpStream::connect(h.addr).await.unwrap();
    assert!(
        closed_by_server(&mut idle).await,
        "an idle connection stays open"
    );

    // Those who send whole heads are served as before.
    assert_eq!(get_healthz(h.addr).await, 200);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_and_are_served_when_others_close() {
    let h = Harness::with(sim_config(), |c| {
        c.http.max_connections = 2;
        // Long enough that only the test closes the two that hold the cap.
        c.http.header_read_timeout_ms = 600_000;
    })
    .await;
    let first = TcpStream::connect(h.addr).await.unwrap();
    let second = TcpStream::connect(h.addr).await.unwrap();

    let mut third = TcpStream::connect(h.addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(NOT_YET, third.read(&mut byte)).await;
    assert!(early.is_err(), "answered past the cap: {early:?}");

    // One of the two closes: the third is served on its place.
    drop(first);
    let head = read_head(&mut third).await;
    assert_eq!(status(&head), 200, "{head}");

    // Many more than the cap at once: each waits its turn, none is lost.
    drop(second);
    let many: Vec<_> = (0..40).map(|_| tokio::spawn(get_healthz(h.addr))).collect();
    for t in many {
        assert_eq!(t.await.unwrap(), 200);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_is_refused_before_it_is_read_when_its_sender_may_not_send_it() {
    let h = Harness::with(sim_config(), |c| {
        common::two_tenants(c);
        c.http.body_read_timeout_ms = 300;
    })
    .await;
    let max = sluice_gateway::config::Config::default().max_body_bytes;
    let part = vec![b' '; 64 * 1_024];

    // Anonymous, a body the size of the cap: 401 after 64 KiB of it.
    let mut s = TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\
         Content-Type: application/json\r\nContent-Length: {max}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&part).await.unwrap();
    let answer = read_head(&mut s).await;
    assert_eq!(status(&answer), 401, "{answer}");
    // The rest of the body is still on the connection: it is closed, and
    // the answer says so.
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(closed_by_server(&mut s).await);

    // Anonymous and chunked, no length to judge by: the same.
    let mut s = TcpStream::connect(h.addr).await.unwrap();
    s.write_all(
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10000\r\n",
    )
    .await
    .unwrap();
    s.write_all(&part).await.unwrap();
    let answer = read_head(&mut s).await;
    assert_eq!(status(&answer), 401, "{answer}");
    assert!(closed_by_server(&mut s).await);

    // A tenant announcing more than the cap: 413 before a byte of it.
    let mut s = TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME}\r\n\
         Content-Length: {}\r\n\r\n",
        max + 1
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = read_head(&mut s).await;
    assert_eq!(status(&answer), 413, "{answer}");
    assert!(closed_by_server(&mut s).await);

    // A tenant whose body stops halfway: 408 once the body timeout passes.
    let mut s = TcpStream::connect(h.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ACME}\r\n\
         Content-Length: 100\r\n\r\n{{\"model\":"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let answer = read_head(&mut s).await;
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(closed_by_server(&mut s).await);

    assert_eq!(h.sim.stats().model("gpt-4o").requests, 0);
    h.stop().await;
}
