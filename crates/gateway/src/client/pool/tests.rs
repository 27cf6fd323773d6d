//! The pool against a real server on a free loopback port, which counts
//! the connections it accepted and those that closed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, Method, Uri};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::{UpstreamClient, UpstreamResponse};

/// A server that answers `ok` to every request on a connection, or to
/// the first only (then closes it without saying so, as an upstream that
/// drops idle connections does).
struct Upstream {
    uri: Uri,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start(one_each: bool) -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}/v1/x", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (a, c) = (Arc::clone(&accepted), Arc::clone(&closed));
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::SeqCst);
                let c = Arc::clone(&c);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    'conn: while let Ok(n @ 1..) = socket.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        // Requests without a body: a head is one request.
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if socket.write_all(answer).await.is_err() || one_each {
                                break 'conn;
                            }
                        }
                    }
                    drop(socket);
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Upstream {
            uri,
            accepted,
            closed,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Waits until `n` connections have closed (at most 30 s, for a test
    /// that would hang).
    async fn closed(&self, n: usize) {
        let wait = async {
            while self.closed.load(Ordering::SeqCst) < n {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), wait)
            .await
            .expect("the connections closed");
    }
}

fn client() -> UpstreamClient {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let none = hyper_util::client::proxy::matcher::Matcher::builder().build();
    UpstreamClient::with_proxies(reqwest::Client::new(), none, 1).unwrap()
}

async fn get(client: &UpstreamClient, up: &Upstream) -> UpstreamResponse {
    client
        .send(
            None,
            Method::GET,
            &up.uri,
            HeaderMap::new(),
            None,
            Bytes::new(),
        )
        .await
        .expect("answered")
}

async fn read(res: UpstreamResponse) -> Bytes {
    axum::body::to_bytes(res.into_body(), 1 << 10)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_answer_read_to_its_end_frees_its_connection_for_the_next() {
    let up = Upstream::start(false).await;
    let client = client();
    for _ in 0..5 {
        assert_eq!(&read(get(&client, &up).await).await[..], b"ok");
    }
    assert_eq!(up.accepted(), 1);
    assert_eq!(client.pools[0].len(), 1);
}

#[tokio::test]
async fn requests_at_once_get_a_connection_each_and_leave_them_for_the_next() {
    let up = Upstream::start(false).await;
    let client = client();
    let answers = futures_util::future::join_all((0..4).map(|_| get(&client, &up))).await;
    assert_eq!(up.accepted(), 4);
    assert_eq!(
        client.pools[0].len(),
        0,
        "no connection is free before its answer is read"
    );
    for res in answers {
        assert_eq!(&read(res).await[..], b"ok");
    }
    assert_eq!(client.pools[0].len(), 4);
    for _ in 0..8 {
        read(get(&client, &up).await).await;
    }
    assert_eq!(up.accepted(), 4);
    // An answer dropped before its end takes its connection with it.
    drop(get(&client, &up).await);
    assert_eq!(client.pools[0].len(), 3);
    up.closed(1).await;
    read(get(&client, &up).await).await;
    assert_eq!(up.accepted(), 4);
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_not_sent_on_again() {
    let up = Upstream::start(true).await;
    let client = client();
    for i in 1..=5 {
        assert_eq!(&read(get(&client, &up).await).await[..], b"ok");
        if i % 2 == 0 {
            // Seen closed by now: dropped from the list at the next call.
            up.closed(i).await;
        }
    }
    assert_eq!(up.accepted(), 5);
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let up = Upstream::start(false).await;
    let mut client = client();
    client.idle_timeout = std::time::Duration::from_millis(90);
    read(get(&client, &up).await).await;
    assert_eq!(client.pools[0].len(), 1);
    up.closed(1).await;
    read(get(&client, &up).await).await;
    assert_eq!(up.accepted(), 2);
    assert_eq!(
        client.pools[0].len(),
        1,
        "the closed one dropped, the new one listed"
    );
}
