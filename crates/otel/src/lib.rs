//! OpenTelemetry spans for Sluice, exported over OTLP.
//!
//! The caller builds finished [`Span`]s itself (ids, times, attributes by
//! their semantic-convention names) and hands a request's spans to an
//! [`Exporter`], which never waits: a background task batches them and
//! sends each batch over OTLP, HTTP/protobuf or gRPC, encoded with the
//! prost types of `opentelemetry-proto`. There is no tracing subscriber
//! and no SDK pipeline: nothing is built for a request that is not
//! sampled, and nothing at all when no exporter is configured.
//!
//! ```no_run
//! use std::time::Duration;
//! use sluice_otel::{Clock, ExportConfig, Exporter, Kind, Protocol, Source, Span};
//!
//! # async fn run() -> Result<(), sluice_otel::ExportError> {
//! let (exporter, task) = Exporter::spawn(ExportConfig {
//!     endpoint: "http://127.0.0.1:4318".parse().expect("a URL"),
//!     protocol: Protocol::HttpProtobuf,
//!     headers: Default::default(),
//!     source: Source::new("sluice"),
//!     sampling_ratio: 1.0,
//!     batch_size: 512,
//!     interval: Duration::from_secs(1),
//!     queue_size: 2048,
//!     timeout: Duration::from_secs(10),
//! })?;
//! let clock = Clock::now();
//! let now = clock.unix_nanos(tokio::time::Instant::now());
//! let mut span = Span::new([1; 16], None, "GET /", Kind::Server, now, now + 1_000);
//! span.set("http.response.status_code", 200u16);
//! exporter.submit(vec![span]);
//! task.shutdown().await; // sends what is queued
//! # Ok(())
//! # }
//! ```

mod encode;
mod export;
mod span;

pub use encode::{SCHEMA_URL, Source, encode, grpc_frame};
pub use export::{
    ExportConfig, ExportError, Exporter, ExporterTask, GRPC_PATH, HTTP_PATH, Protocol, Stats,
};
pub use span::{Clock, Kind, Span, SpanId, Status, TraceId, Value, new_span_id};
