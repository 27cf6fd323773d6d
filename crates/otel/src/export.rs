//! The exporter: a handle that takes finished spans without ever waiting
//! ([`Exporter::submit`]) and a background task that batches them and
//! sends each batch over OTLP, HTTP/protobuf or gRPC.
//!
//! The queue is bounded in spans (`queue_size`, counting the batch being
//! filled and the one being sent): past it a request's spans are dropped
//! and counted in `sluice_otel_spans_dropped_total{reason="queue_full"}`,
//! so a collector that is slow or away never slows a request down. A
//! batch the collector refuses or does not answer within `timeout` is
//! dropped too (`reason="export_failed"`), not sent again: the next
//! batch is already waiting behind it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::encode::{Encoder, Source};
use crate::span::{Span, TraceId};

/// The gRPC method spans are sent to.
pub const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The HTTP path spans are sent to, under the endpoint.
pub const HTTP_PATH: &str = "/v1/traces";

/// How spans travel to the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `POST {endpoint}/v1/traces`, `application/x-protobuf`.
    HttpProtobuf,
    /// The `TraceService/Export` unary call over HTTP/2.
    Grpc,
}

/// What the exporter needs.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// The collector: `http://host:4318` (HTTP, `/v1/traces` appended
    /// unless the path already ends with it) or `http://host:4317`
    /// (gRPC; any path is replaced by the method's).
    pub endpoint: reqwest::Url,
    /// HTTP/protobuf or gRPC.
    pub protocol: Protocol,
    /// Sent with every export (e.g. an API key of the collector).
    pub headers: HeaderMap,
    /// The resource the spans come from.
    pub source: Source,
    /// The share of new traces sampled, 0 to 1; a request that continues
    /// a client's trace follows the client's `sampled` flag.
    pub sampling_ratio: f64,
    /// Spans sent in one export at most.
    pub batch_size: usize,
    /// A batch that is not full is sent after this long.
    pub interval: Duration,
    /// Spans waiting at most; past it new ones are dropped and counted.
    pub queue_size: usize,
    /// The longest one export may take.
    pub timeout: Duration,
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The collector could not be reached or did not answer in time.
    #[error("sending to the collector: {0}")]
    Transport(#[from] reqwest::Error),
    /// The collector answered with an HTTP error.
    #[error("the collector answered HTTP {0}")]
    Status(u16),
    /// The collector answered with a gRPC error.
    #[error("the collector answered gRPC status {code}: {message}")]
    Grpc {
        /// The gRPC status code.
        code: u32,
        /// Its `grpc-message`.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("building the OTLP client: {0}")]
    Client(reqwest::Error),
}

/// Counts since the exporter started (also Prometheus counters).
#[derive(Debug, Default)]
struct Counts {
    exported: AtomicU64,
    queue_full: AtomicU64,
    export_failed: AtomicU64,
    rejected: AtomicU64,
}

/// What the exporter has done so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Spans the collector accepted.
    pub exported: u64,
    /// Spans dropped because the queue was full (or the task stopped).
    pub queue_full: u64,
    /// Spans of exports that failed.
    pub export_failed: u64,
    /// Spans the collector said it rejected (a partial success).
    pub rejected: u64,
}

/// What the handles and the task share. Spans wait in `pending`, a
/// plain vector behind a lock held only to append or to swap it out: a
/// request appends its spans without waking anyone, and only the one
/// whose spans fill a batch wakes the task (`full`), which otherwise
/// wakes once per `interval`. One wake per batch, not one per request.
#[derive(Debug)]
struct Shared {
    pending: Mutex<Vec<Span>>,
    full: Notify,
    /// Set when the task has stopped: nothing would send new spans.
    stopped: AtomicBool,
    /// Spans in `pending` and in the batch being sent.
    queued: AtomicUsize,
    queue_size: usize,
    batch_size: usize,
    /// A new trace is sampled when the low 64 bits of its id are below
    /// this (`ratio · 2^64`; the W3C asks for random low bits).
    sample_below: u64,
    sample_all: bool,
    counts: Counts,
}

impl Shared {
    /// The spans waiting, swapped for `empty` (which keeps its capacity
    /// for the next batch).
    fn take(&self, empty: Vec<Span>) -> Vec<Span> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *pending, empty)
    }
}

/// The handle spans are submitted to; cheap to clone.
#[derive(Debug, Clone)]
pub struct Exporter {
    shared: Arc<Shared>,
}

/// The background task; [`ExporterTask::shutdown`] sends what is queued
/// and stops it.
#[derive(Debug)]
pub struct ExporterTask {
    stop: oneshot::Sender<()>,
    handle: JoinHandle<()>,
}

impl Exporter {
    /// Starts the exporter's task on the current runtime.
    ///
    /// # Errors
    /// [`ExportError::Client`] when the HTTP client cannot be built.
    ///
    /// # Panics
    /// When reqwest is built with `rustls-no-provider` (as in the
    /// workspace, for the gateway) and no rustls crypto provider was
    /// installed first: the gateway installs ring before it starts this.
    pub fn spawn(config: ExportConfig) -> Result<(Exporter, ExporterTask), ExportError> {
        let mut client = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none());
        let url = match config.protocol {
            Protocol::HttpProtobuf => {
                client = client.http1_only();
                http_url(&config.endpoint)
            }
            Protocol::Grpc => {
                client = client.http2_prior_knowledge();
                let mut url = config.endpoint.clone();
                url.set_path(GRPC_PATH);
                url.set_query(None);
                url
            }
        };
        let client = client.build().map_err(ExportError::Client)?;
        let batch_size = config.batch_size.max(1);
        let ratio = config.sampling_ratio.clamp(0.0, 1.0);
        let shared = Arc::new(Shared {
            pending: Mutex::new(Vec::with_capacity(batch_size)),
            full: Notify::new(),
            stopped: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            queue_size: config.queue_size.max(1),
            batch_size,
            // Truncation is fine: the bound is a probability.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            sample_below: (ratio * 2f64.powi(64)) as u64,
            sample_all: ratio >= 1.0,
            counts: Counts::default(),
        });
        let (stop, stopped) = oneshot::channel();
        let worker = Worker {
            shared: shared.clone(),
            client,
            url,
            encoder: Encoder::new(&config.source),
            config,
        };
        let handle = tokio::spawn(worker.run(stopped));
        Ok((Exporter { shared }, ExporterTask { stop, handle }))
    }

    /// Whether a request of `trace_id` is recorded: the client's decision
    /// when it sent one (`parent_sampled`), else the sampling ratio.
    pub fn sampled(&self, trace_id: &TraceId, parent_sampled: Option<bool>) -> bool {
        if let Some(decided) = parent_sampled {
            return decided;
        }
        let s = &self.shared;
        if s.sample_all {
            return true;
        }
        let mut low = [0; 8];
        low.copy_from_slice(&trace_id[8..]);
        u64::from_be_bytes(low) < s.sample_below
    }

    /// Queues a request's spans for export; never waits. Past
    /// `queue_size` spans waiting they are dropped and counted.
    pub fn submit(&self, spans: Vec<Span>) {
        let n = spans.len();
        if n == 0 {
            return;
        }
        let s = &self.shared;
        if s.stopped.load(Ordering::Acquire) {
            self.dropped_full(n);
            return;
        }
        if s.queued.fetch_add(n, Ordering::AcqRel) + n > s.queue_size {
            s.queued.fetch_sub(n, Ordering::AcqRel);
            self.dropped_full(n);
            return;
        }
        let waiting = {
            let mut pending = s.pending.lock().unwrap_or_else(PoisonError::into_inner);
            pending.extend(spans);
            pending.len()
        };
        // Only the spans that fill the batch wake the task: it takes all
        // that wait, so the next wake is for the next full batch.
        if waiting >= s.batch_size && waiting - n < s.batch_size {
            s.full.notify_one();
        }
    }

    fn dropped_full(&self, n: usize) {
        self.shared
            .counts
            .queue_full
            .fetch_add(n as u64, Ordering::Relaxed);
        metrics::counter!("sluice_otel_spans_dropped_total", "reason" => "queue_full")
            .increment(n as u64);
    }

    /// What the exporter has done so far.
    pub fn stats(&self) -> Stats {
        let c = &self.shared.counts;
        Stats {
            exported: c.exported.load(Ordering::Relaxed),
            queue_full: c.queue_full.load(Ordering::Relaxed),
            export_failed: c.export_failed.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
        }
    }
}

impl ExporterTask {
    /// Sends every span queued so far, then stops the task.
    pub async fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.handle.await;
    }
}

/// `endpoint` with `/v1/traces` appended, unless it already ends so.
fn http_url(endpoint: &reqwest::Url) -> reqwest::Url {
    let mut url = endpoint.clone();
    if !url.path().ends_with(HTTP_PATH) {
        let path = format!("{}{HTTP_PATH}", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    url
}

struct Worker {
    shared: Arc<Shared>,
    client: reqwest::Client,
    url: reqwest::Url,
    encoder: Encoder,
    config: ExportConfig,
}

impl Worker {
    /// Sends a batch when one is full or `interval` passed, until told to
    /// stop (or its [`ExporterTask`] is dropped); then sends what waits.
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut batch: Vec<Span> = Vec::with_capacity(self.shared.batch_size);
        let mut tick = tokio::time::interval(self.config.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let shared = self.shared.clone();
        loop {
            let stopping = tokio::select! {
                biased;
                _ = &mut stop => true,
                () = shared.full.notified() => false,
                _ = tick.tick() => false,
            };
            if stopping {
                // Spans submitted from now on are counted as dropped.
                shared.stopped.store(true, Ordering::Release);
            }
            batch = shared.take(batch);
            if !batch.is_empty() {
                self.flush(&mut batch).await;
            }
            if stopping {
                return;
            }
        }
    }

    /// Sends `batch` in exports of at most `batch_size` spans, and
    /// empties it.
    async fn flush(&mut self, batch: &mut Vec<Span>) {
        let shared = Arc::clone(&self.shared);
        let counts = &shared.counts;
        for chunk in batch.chunks(shared.batch_size) {
            let n = chunk.len() as u64;
            match self.export(chunk).await {
                Ok(rejected) => {
                    let rejected = rejected.min(n);
                    counts.exported.fetch_add(n - rejected, Ordering::Relaxed);
                    metrics::counter!("sluice_otel_spans_exported_total").increment(n - rejected);
                    if rejected > 0 {
                        counts.rejected.fetch_add(rejected, Ordering::Relaxed);
                        metrics::counter!("sluice_otel_spans_dropped_total", "reason" => "rejected")
                            .increment(rejected);
                    }
                }
                Err(e) => {
                    counts.export_failed.fetch_add(n, Ordering::Relaxed);
                    metrics::counter!("sluice_otel_spans_dropped_total", "reason" => "export_failed")
                        .increment(n);
                    tracing::warn!(error = %e, spans = n, url = %self.url, "OTLP export failed; spans dropped");
                }
            }
        }
        shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        batch.clear();
    }

    /// One export; the spans the collector says it rejected.
    async fn export(&mut self, spans: &[Span]) -> Result<u64, ExportError> {
        let grpc = self.config.protocol == Protocol::Grpc;
        let body = self.encoder.request(spans, grpc);
        let content_type = if grpc {
            "application/grpc"
        } else {
            "application/x-protobuf"
        };
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.config.headers.clone())
            .header(CONTENT_TYPE, content_type)
            .body(body);
        if self.config.protocol == Protocol::Grpc {
            request = request.header("te", HeaderValue::from_static("trailers"));
        }
        let response = request.send().await?;
        let status = response.status();
        if !status.is_success() {
            return Err(ExportError::Status(status.as_u16()));
        }
        match self.config.protocol {
            Protocol::HttpProtobuf => {
                let body = response.bytes().await?;
                Ok(rejected(&body))
            }
            Protocol::Grpc => grpc_answer(response).await,
        }
    }
}

/// The spans a response body says were rejected (an empty or unreadable
/// body: none; the export itself succeeded).
fn rejected(message: &[u8]) -> u64 {
    ExportTraceServiceResponse::decode(message)
        .ok()
        .and_then(|r| r.partial_success)
        .map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0))
}

/// Reads a gRPC answer: its status in the headers (a trailers-only
/// answer) or in the trailers, then its message.
async fn grpc_answer(response: reqwest::Response) -> Result<u64, ExportError> {
    let response: http::Response<reqwest::Body> = response.into();
    let (parts, body) = response.into_parts();
    let collected = body.collect().await?;
    let status = grpc_status(&parts.headers).or_else(|| collected.trailers().and_then(grpc_status));
    let message = collected.to_bytes();
    match status {
        Some((0, _)) => Ok(rejected(message.get(5..).unwrap_or_default())),
        Some((code, message)) => Err(ExportError::Grpc { code, message }),
        None => Err(ExportError::Grpc {
            code: 2,
            message: "the answer carried no grpc-status".into(),
        }),
    }
}

/// `grpc-status` and `grpc-message` of `headers`, when there.
fn grpc_status(headers: &HeaderMap) -> Option<(u32, String)> {
    let code = headers
        .get("grpc-status")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let message = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Some((code, message))
}
