use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::routing::any;

use super::*;

/// What a local server saw of each request: method, URI as sent (origin
/// or absolute form), headers and body.
type Seen = Arc<Mutex<Vec<(Method, String, HeaderMap, Bytes)>>>;

/// A server on a free loopback port that records every request and
/// answers 201 with `x-answer: yes` and `answered`; its address.
async fn recorder() -> (std::net::SocketAddr, Seen) {
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    let app = axum::Router::new().fallback(any(move |req: Request| {
        let log = Arc::clone(&log);
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20)
                .await
                .unwrap_or_default();
            let uri = parts.uri.to_string();
            log.lock()
                .unwrap()
                .push((parts.method, uri, parts.headers, body));
            (
                axum::http::StatusCode::CREATED,
                [("x-answer", "yes")],
                "answered",
            )
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}

/// Installs the crypto provider the gateway installs at start.
fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn client(proxies: Matcher, proxied: reqwest::Client) -> UpstreamClient {
    UpstreamClient::with_proxies(proxied, proxies, 1).unwrap()
}

fn no_proxies() -> UpstreamClient {
    tls();
    client(Matcher::builder().build(), reqwest::Client::new())
}

#[tokio::test]
async fn sends_the_request_as_given_and_reads_the_answer() {
    let (addr, seen) = recorder().await;
    let uri: Uri = format!("http://{addr}/v1/chat?x=1").parse().unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("authorization", HeaderValue::from_static("Bearer k"));
    let res = no_proxies()
        .send(
            None,
            Method::POST,
            &uri,
            headers,
            None,
            Bytes::from_static(b"{\"a\":1}"),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.headers()["x-answer"], "yes");
    let body = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(&body[..], b"answered");
    let seen = seen.lock().unwrap();
    let (method, uri, headers, body) = &seen[0];
    assert_eq!(method, Method::POST);
    // Origin form, as a direct HTTP/1.1 request is sent.
    assert_eq!(uri, "/v1/chat?x=1");
    assert_eq!(headers["authorization"], "Bearer k");
    assert_eq!(headers["host"], addr.to_string().as_str());
    assert_eq!(headers["content-length"], "7");
    // As reqwest sent it when the caller named no type.
    assert_eq!(headers["accept"], "*/*");
    assert_eq!(&body[..], b"{\"a\":1}");
}

#[test]
fn the_host_header_names_the_port_unless_it_is_the_schemes_own() {
    for (uri, want) in [
        ("http://a.example/x", "a.example"),
        ("http://a.example:80/x", "a.example"),
        ("http://a.example:443/x", "a.example:443"),
        ("https://a.example:443/x", "a.example"),
        ("https://a.example:80/x", "a.example:80"),
        ("http://127.0.0.1:8080/x", "127.0.0.1:8080"),
        ("http://[::1]:9/x", "[::1]:9"),
    ] {
        let uri: Uri = uri.parse().unwrap();
        assert_eq!(host_header(&uri).unwrap(), want, "{uri}");
    }
}

#[tokio::test]
async fn a_host_made_once_is_the_one_the_client_makes() {
    let (addr, seen) = recorder().await;
    let uri: Uri = format!("http://{addr}/v1/chat").parse().unwrap();
    let client = no_proxies();
    let host = host_header(&uri).unwrap();
    for made in [None, Some(&host)] {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        client
            .send(
                None,
                Method::POST,
                &uri,
                headers,
                made,
                Bytes::from_static(b"{}"),
            )
            .await
            .unwrap();
    }
    let seen = seen.lock().unwrap();
    let sent = |i: usize| -> Vec<(String, HeaderValue)> {
        seen[i]
            .2
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
            .collect()
    };
    // The same headers, in the same order.
    assert_eq!(sent(0), sent(1));
    assert_eq!(seen[1].2["host"], addr.to_string().as_str());
}

#[tokio::test]
async fn keeps_the_callers_accept() {
    let (addr, seen) = recorder().await;
    let uri: Uri = format!("http://{addr}/").parse().unwrap();
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    no_proxies()
        .send(None, Method::GET, &uri, headers, None, Bytes::new())
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    let accept: Vec<_> = seen[0].2.get_all(ACCEPT).iter().collect();
    assert_eq!(accept, ["text/event-stream"]);
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error_without_the_url() {
    // A port bound and released: nothing listens there now.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let uri: Uri = format!("http://{addr}/secret-path?key=sk-1")
        .parse()
        .unwrap();
    let e = no_proxies()
        .send(
            None,
            Method::POST,
            &uri,
            HeaderMap::new(),
            None,
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_connect(), "{e}");
    let message = e.to_string();
    assert!(
        message.starts_with("cannot connect to upstream: "),
        "{message}"
    );
    assert!(!message.contains("sk-1"), "{message}");
}

#[tokio::test]
async fn an_https_uri_is_never_sent_in_the_clear() {
    // A plain HTTP server cannot complete a TLS handshake: an `https`
    // URI is never sent in the clear.
    let (addr, seen) = recorder().await;
    let uri: Uri = format!("https://{addr}/").parse().unwrap();
    let e = no_proxies()
        .send(
            None,
            Method::GET,
            &uri,
            HeaderMap::new(),
            None,
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_connect(), "{e}");
    assert!(seen.lock().unwrap().is_empty());
}

/// A client whose proxy settings send `http` destinations but 127.0.0.2
/// through a recorder, and what the recorder saw.
async fn behind_a_proxy() -> (UpstreamClient, Seen) {
    let (proxy, seen) = recorder().await;
    let proxy_url = format!("http://{proxy}");
    let matcher = Matcher::builder()
        .http(proxy_url.clone())
        .no("127.0.0.2")
        .build();
    tls();
    let proxied = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(&proxy_url).unwrap())
        .build()
        .unwrap();
    (client(matcher, proxied), seen)
}

#[tokio::test]
async fn a_destination_behind_a_proxy_goes_through_it() {
    let (client, seen) = behind_a_proxy().await;
    // Nothing listens at upstream.invalid: only the proxy can answer.
    let uri: Uri = "http://upstream.invalid/v1/x".parse().unwrap();
    let res = client
        .send(
            None,
            Method::POST,
            &uri,
            HeaderMap::new(),
            None,
            Bytes::from_static(b"b"),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    assert_eq!(&body[..], b"answered");
    {
        let seen = seen.lock().unwrap();
        // Absolute form: a request to a proxy.
        assert_eq!(seen[0].1, "http://upstream.invalid/v1/x");
        assert_eq!(&seen[0].3[..], b"b");
    }
    // `NO_PROXY` destinations go direct (nothing listens there).
    let direct: Uri = "http://127.0.0.2:9/".parse().unwrap();
    let e = client
        .send(
            None,
            Method::GET,
            &direct,
            HeaderMap::new(),
            None,
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert!(e.is_connect(), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_route_decided_at_start_is_the_one_taken() {
    let (client, seen) = behind_a_proxy().await;
    let behind: Uri = "http://upstream.invalid/v1/x".parse().unwrap();
    let direct: Uri = "http://127.0.0.2:9/v1/x".parse().unwrap();
    assert_eq!(client.route(&behind), Route::Proxied);
    assert_eq!(client.route(&direct), Route::Direct);
    // Routes decided per provider and API from their base URLs, as the
    // requests to them are.
    let mut config = crate::config::Config::default();
    config.providers.truncate(1);
    config.providers[0].base_url = "http://upstream.invalid/v1".into();
    config.apis.truncate(2);
    config.apis[0].name = "near".into();
    config.apis[0].base_url = "http://127.0.0.2:9".into();
    config.apis[1].name = "broken".into();
    config.apis[1].base_url = "not a url".into();
    let routes = Routes::new(&config, &client);
    assert_eq!(routes.provider(0), Some(Route::Proxied));
    assert_eq!(routes.provider(1), None);
    assert_eq!(routes.api("near"), Some(Route::Direct));
    assert_eq!(routes.api("broken"), None);
    assert_eq!(routes.api("unknown"), None);
    // The route given is the one taken, whatever the URI.
    let get = |route| {
        let headers = HeaderMap::new();
        client.send(
            Some(route),
            Method::GET,
            &behind,
            headers,
            None,
            Bytes::new(),
        )
    };
    let e = get(Route::Direct).await.unwrap_err();
    assert!(e.is_connect(), "{e}");
    assert!(seen.lock().unwrap().is_empty());
    let res = get(Route::Proxied).await.unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(seen.lock().unwrap()[0].1, "http://upstream.invalid/v1/x");
}
