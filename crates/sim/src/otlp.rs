//! An OTLP trace receiver, the collector's side of the wire: `POST
//! /v1/traces` (HTTP/protobuf) and the gRPC method
//! `opentelemetry.proto.collector.trace.v1.TraceService/Export` (HTTP/2
//! without TLS, prior knowledge), on one port. Started to keep what it
//! receives, it decodes every request with the prost types of
//! `opentelemetry-proto`, so a body that is not a valid
//! `ExportTraceServiceRequest` is refused (HTTP 400, gRPC status 3) and
//! never counted; started for a benchmark, it only counts exports and
//! answers (a collector's decoding is not the exporter's cost).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let receiver = sluice_sim::otlp::Receiver::start(true).await?;
//! println!("[otel] endpoint = \"{}\"", receiver.url());
//! assert!(receiver.spans().is_empty());
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use opentelemetry_proto::tonic::common::v1::any_value::Value as AttributeValue;
pub use opentelemetry_proto::tonic::trace::v1::Span;

/// The gRPC method's path.
pub const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

#[derive(Debug, Default)]
struct Received {
    keep: bool,
    spans: Mutex<Vec<Span>>,
    http: AtomicU64,
    grpc: AtomicU64,
    count: AtomicU64,
}

/// A running receiver; dropping it stops the server.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    received: Arc<Received>,
    task: JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// Serves on a free port of 127.0.0.1. With `keep`, the spans
    /// received are decoded and kept for [`Receiver::spans`]; without,
    /// exports are only counted ([`Receiver::exports`]).
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(keep: bool) -> std::io::Result<Receiver> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let received = Arc::new(Received {
            keep,
            ..Received::default()
        });
        let app = Router::new()
            .route("/v1/traces", post(http_export))
            .route(GRPC_PATH, post(grpc_export))
            .with_state(received.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(error = %e, "OTLP receiver failed");
            }
        });
        Ok(Receiver {
            addr,
            received,
            task,
        })
    }

    /// `http://127.0.0.1:{port}`: the endpoint for either protocol.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans received so far, in the order they came (kept only when
    /// started with `keep`).
    pub fn spans(&self) -> Vec<Span> {
        self.received
            .spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Spans received so far (kept ones only).
    pub fn count(&self) -> u64 {
        self.received.count.load(Ordering::Relaxed)
    }

    /// Exports received over HTTP and over gRPC.
    pub fn exports(&self) -> (u64, u64) {
        (
            self.received.http.load(Ordering::Relaxed),
            self.received.grpc.load(Ordering::Relaxed),
        )
    }

    /// Waits until `n` spans have come, at most `limit` (then returns
    /// what came: the caller's assertions say what was missing).
    pub async fn wait_for(&self, n: u64, limit: Duration) -> Vec<Span> {
        let until = tokio::time::Instant::now() + limit;
        while self.count() < n && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.spans()
    }
}

impl Received {
    /// Decodes and keeps an export's spans; `Err` says why it is not one.
    fn take(&self, message: &[u8]) -> Result<(), String> {
        if !self.keep {
            return Ok(());
        }
        let request =
            ExportTraceServiceRequest::decode(message).map_err(|e| format!("not OTLP: {e}"))?;
        let spans: Vec<Span> = request
            .resource_spans
            .into_iter()
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect();
        self.count.fetch_add(spans.len() as u64, Ordering::Relaxed);
        self.spans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(spans);
        Ok(())
    }
}

async fn http_export(
    State(received): State<Arc<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let protobuf = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/x-protobuf"));
    if !protobuf {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type must be application/x-protobuf",
        )
            .into_response();
    }
    if let Err(e) = received.take(&body) {
        return (StatusCode::BAD_REQUEST, e).into_response();
    }
    received.http.fetch_add(1, Ordering::Relaxed);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

async fn grpc_export(
    State(received): State<Arc<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let grpc = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "not gRPC").into_response();
    }
    let taken = unframe(&body)
        .map_err(str::to_owned)
        .and_then(|m| received.take(m));
    if let Err(e) = taken {
        return grpc_answer(3, &e, Bytes::new());
    }
    received.grpc.fetch_add(1, Ordering::Relaxed);
    let message = ExportTraceServiceResponse::default().encode_to_vec();
    let mut framed = Vec::with_capacity(5 + message.len());
    framed.push(0);
    framed.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    framed.extend_from_slice(&message);
    grpc_answer(0, "", framed.into())
}

/// The message of one gRPC frame.
fn unframe(body: &[u8]) -> Result<&[u8], &'static str> {
    let (head, rest) = body
        .split_at_checked(5)
        .ok_or("a gRPC frame has a 5-byte header")?;
    if head[0] != 0 {
        return Err("compressed messages are not accepted");
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if rest.len() != len {
        return Err("the frame's length is not the body's");
    }
    Ok(rest)
}

/// A gRPC answer: `message` then the status in the trailers.
fn grpc_answer(code: u32, message: &str, body: Bytes) -> Response {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from(code));
    if let Ok(m) = HeaderValue::from_str(message)
        && !message.is_empty()
    {
        trailers.insert("grpc-message", m);
    }
    let body = http_body_util::Full::new(body)
        .with_trailers(async move { Some(Ok::<_, std::convert::Infallible>(trailers)) });
    let mut res = Response::new(Body::new(body));
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    res
}
