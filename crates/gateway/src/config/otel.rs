//! The `[otel]` section: OpenTelemetry export over OTLP (see
//! docs/observability.md). Off unless the section is there.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How spans travel to the collector (OTel's
/// `OTEL_EXPORTER_OTLP_PROTOCOL` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OtlpProtocol {
    /// `POST {endpoint}/v1/traces`, protobuf body.
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// The `TraceService/Export` call over HTTP/2.
    #[serde(rename = "grpc")]
    Grpc,
}

/// `[otel]`: spans of every sampled request, exported over OTLP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelSettings {
    /// The collector: `http://host:4318` for `http/protobuf`
    /// (`/v1/traces` is appended unless the path ends with it),
    /// `http://host:4317` for `grpc`.
    pub endpoint: String,
    /// `http/protobuf` (default) or `grpc`.
    #[serde(default)]
    pub protocol: OtlpProtocol,
    /// Headers sent with every export (a collector's API key).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `service.name` of the spans.
    #[serde(default = "service_name")]
    pub service_name: String,
    /// The share of new traces recorded, 0 to 1; a request that continues
    /// a client's trace follows the client's `sampled` flag.
    #[serde(default = "one")]
    pub sampling_ratio: f64,
    /// Spans sent in one export at most.
    #[serde(default = "batch_size")]
    pub batch_size: usize,
    /// A batch that is not full is sent after this long.
    #[serde(default = "batch_interval_ms")]
    pub batch_interval_ms: u64,
    /// Spans waiting for export at most; past it new ones are dropped and
    /// counted (`sluice_otel_spans_dropped_total{reason="queue_full"}`).
    #[serde(default = "queue_size")]
    pub queue_size: usize,
    /// The longest one export may take.
    #[serde(default = "timeout_ms")]
    pub timeout_ms: u64,
}

fn service_name() -> String {
    "sluice".into()
}

fn one() -> f64 {
    1.0
}

fn batch_size() -> usize {
    512
}

fn batch_interval_ms() -> u64 {
    1_000
}

fn queue_size() -> usize {
    2_048
}

fn timeout_ms() -> u64 {
    10_000
}

impl OtelSettings {
    /// The exporter's configuration (checked at load: the endpoint
    /// parses, the headers are valid).
    ///
    /// # Errors
    /// What is wrong with the endpoint or a header, naming the key.
    pub fn export_config(&self) -> Result<sluice_otel::ExportConfig, String> {
        let endpoint = self
            .endpoint
            .parse()
            .map_err(|e| format!("otel.endpoint: is not a URL: {e}"))?;
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value) in &self.headers {
            let (n, v) = header(name, value).map_err(|e| format!("otel.headers.{name}: {e}"))?;
            headers.insert(n, v);
        }
        Ok(sluice_otel::ExportConfig {
            endpoint,
            protocol: match self.protocol {
                OtlpProtocol::HttpProtobuf => sluice_otel::Protocol::HttpProtobuf,
                OtlpProtocol::Grpc => sluice_otel::Protocol::Grpc,
            },
            headers,
            source: sluice_otel::Source::new(self.service_name.clone()),
            sampling_ratio: self.sampling_ratio,
            batch_size: self.batch_size,
            interval: Duration::from_millis(self.batch_interval_ms),
            queue_size: self.queue_size,
            timeout: Duration::from_millis(self.timeout_ms),
        })
    }
}

/// `name: value` as a header to send.
///
/// # Errors
/// Why it cannot be sent (the value is not repeated: it may be a key).
pub(crate) fn header(
    name: &str,
    value: &str,
) -> Result<(reqwest::header::HeaderName, reqwest::header::HeaderValue), &'static str> {
    let n = reqwest::header::HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| "is not a valid header name")?;
    let v = reqwest::header::HeaderValue::from_str(value)
        .map_err(|_| "is not a valid header value (visible ASCII only)")?;
    Ok((n, v))
}
