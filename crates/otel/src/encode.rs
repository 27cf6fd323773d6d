//! Spans into OTLP's `ExportTraceServiceRequest`, written straight as
//! protobuf bytes, and the 5-byte framing of a gRPC message.
//!
//! The wire format is the one the prost types of `opentelemetry-proto`
//! decode (the tests check it with them), but it is written field by
//! field from [`Span`]s: building those types first would cost two
//! allocations per attribute (its key and its string) and one per id,
//! for every span, only to be thrown away once encoded. The resource and
//! scope, the same in every export, are encoded once, and the buffers are
//! reused from one batch to the next.

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use crate::span::{Kind, Span, Status, Value};

/// The semantic conventions the attribute names follow.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

/// W3C trace flag `sampled`: every exported span was sampled.
const SAMPLED: u32 = 0x01;
/// `SpanFlags`: whether the parent is remote is known …
const HAS_IS_REMOTE: u32 = 0x100;
/// … and it is.
const IS_REMOTE: u32 = 0x200;
/// `Status.code` of a failed span.
const STATUS_ERROR: u64 = 2;

/// Who sends the spans: the OTLP resource and instrumentation scope.
#[derive(Debug, Clone)]
pub struct Source {
    /// `service.name`.
    pub service_name: String,
    /// `service.version`.
    pub service_version: String,
    /// `service.instance.id`: this process among the service's replicas.
    pub instance_id: String,
}

impl Source {
    /// `service_name` at this crate's version, with a random instance id.
    pub fn new(service_name: impl Into<String>) -> Source {
        Source {
            service_name: service_name.into(),
            service_version: env!("CARGO_PKG_VERSION").to_owned(),
            instance_id: format!("{:032x}", fastrand::u128(..)),
        }
    }
}

/// `spans` as one request body, protobuf-encoded.
pub fn encode(source: &Source, spans: &[Span]) -> Vec<u8> {
    Encoder::new(source).request(spans, false)
}

/// `spans` as one gRPC message: a zero byte (not compressed), the
/// message's length as four big-endian bytes, then the message.
pub fn grpc_frame(source: &Source, spans: &[Span]) -> Vec<u8> {
    Encoder::new(source).request(spans, true)
}

/// Encodes batches of spans from one [`Source`], keeping what every
/// export shares (the resource, the scope) and its scratch buffers.
#[derive(Debug)]
pub(crate) struct Encoder {
    /// `ResourceSpans.resource` and its key.
    resource: Vec<u8>,
    /// `ScopeSpans.scope` and its key.
    scope: Vec<u8>,
    /// The spans of the batch being encoded, each as `ScopeSpans.spans`.
    spans: Vec<u8>,
    /// One span's fields.
    one: Vec<u8>,
}

impl Encoder {
    pub(crate) fn new(source: &Source) -> Encoder {
        let mut attributes = Vec::new();
        for (key, value) in [
            ("service.name", source.service_name.as_str()),
            ("service.version", source.service_version.as_str()),
            ("service.instance.id", source.instance_id.as_str()),
            ("telemetry.sdk.name", "sluice"),
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ] {
            let value = Value::Str(value.to_owned().into());
            header(&mut attributes, 1, kv_len(key, &value));
            kv(&mut attributes, key, &value);
        }
        let mut resource = Vec::new();
        bytes(&mut resource, 1, &attributes);
        let mut scope_fields = Vec::new();
        bytes(&mut scope_fields, 1, b"sluice");
        bytes(&mut scope_fields, 2, env!("CARGO_PKG_VERSION").as_bytes());
        let mut scope = Vec::new();
        bytes(&mut scope, 1, &scope_fields);
        Encoder {
            resource,
            scope,
            spans: Vec::new(),
            one: Vec::new(),
        }
    }

    /// `spans` as an `ExportTraceServiceRequest`; as a gRPC message
    /// (`grpc`) or a bare one.
    pub(crate) fn request(&mut self, spans: &[Span], grpc: bool) -> Vec<u8> {
        self.spans.clear();
        for s in spans {
            self.one.clear();
            span(&mut self.one, s);
            bytes(&mut self.spans, 2, &self.one);
        }
        let schema = bytes_len(3, SCHEMA_URL.len());
        let scope_spans = self.scope.len() + self.spans.len() + schema;
        let resource_spans = self.resource.len() + bytes_len(2, scope_spans) + schema;
        let len = bytes_len(1, resource_spans);
        let mut out = Vec::with_capacity(len + 5);
        if grpc {
            out.push(0);
            out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        }
        header(&mut out, 1, resource_spans);
        out.extend_from_slice(&self.resource);
        header(&mut out, 2, scope_spans);
        out.extend_from_slice(&self.scope);
        out.extend_from_slice(&self.spans);
        bytes(&mut out, 3, SCHEMA_URL.as_bytes());
        bytes(&mut out, 3, SCHEMA_URL.as_bytes());
        out
    }
}

/// A `Span` message's fields.
fn span(buf: &mut Vec<u8>, s: &Span) {
    bytes(buf, 1, &s.trace_id);
    bytes(buf, 2, &s.span_id);
    if let Some(parent) = &s.parent {
        bytes(buf, 4, parent);
    }
    bytes(buf, 5, s.name.as_bytes());
    let kind: u64 = match s.kind {
        Kind::Internal => 1,
        Kind::Server => 2,
        Kind::Client => 3,
        Kind::Producer => 4,
        Kind::Consumer => 5,
    };
    varint(buf, 6, kind);
    encode_key(7, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&s.start_unix_nanos.to_le_bytes());
    encode_key(8, WireType::SixtyFourBit, buf);
    buf.extend_from_slice(&s.end_unix_nanos.max(s.start_unix_nanos).to_le_bytes());
    for (key, value) in &s.attributes {
        header(buf, 9, kv_len(key, value));
        kv(buf, key, value);
    }
    if let Status::Error(message) = &s.status {
        let len = bytes_len(2, message.len()) + key_len(3) + encoded_len_varint(STATUS_ERROR);
        header(buf, 15, len);
        bytes(buf, 2, message.as_bytes());
        varint(buf, 3, STATUS_ERROR);
    }
    let flags = SAMPLED | HAS_IS_REMOTE | if s.remote_parent { IS_REMOTE } else { 0 };
    encode_key(16, WireType::ThirtyTwoBit, buf);
    buf.extend_from_slice(&flags.to_le_bytes());
}

/// A `KeyValue` message's fields.
fn kv(buf: &mut Vec<u8>, key: &str, value: &Value) {
    bytes(buf, 1, key.as_bytes());
    header(buf, 2, any_len(value));
    match value {
        Value::Str(s) => bytes(buf, 1, s.as_bytes()),
        Value::Bool(b) => varint(buf, 2, u64::from(*b)),
        // Two's complement, as protobuf's int64 is.
        #[allow(clippy::cast_sign_loss)]
        Value::Int(n) => varint(buf, 3, *n as u64),
        Value::Double(x) => {
            encode_key(4, WireType::SixtyFourBit, buf);
            buf.extend_from_slice(&x.to_le_bytes());
        }
        Value::Strs(list) => {
            header(buf, 5, array_len(list));
            for s in list {
                header(buf, 1, bytes_len(1, s.len()));
                bytes(buf, 1, s.as_bytes());
            }
        }
    }
}

fn kv_len(key: &str, value: &Value) -> usize {
    bytes_len(1, key.len()) + bytes_len(2, any_len(value))
}

/// The length of an `AnyValue` message holding `value`.
fn any_len(value: &Value) -> usize {
    match value {
        Value::Str(s) => bytes_len(1, s.len()),
        Value::Bool(_) => key_len(2) + 1,
        #[allow(clippy::cast_sign_loss)]
        Value::Int(n) => key_len(3) + encoded_len_varint(*n as u64),
        Value::Double(_) => key_len(4) + 8,
        Value::Strs(list) => bytes_len(5, array_len(list)),
    }
}

/// The length of an `ArrayValue` of strings.
fn array_len(list: &[String]) -> usize {
    list.iter()
        .map(|s| bytes_len(1, bytes_len(1, s.len())))
        .sum()
}

/// A length-delimited field (bytes, a string, a message) of `len` bytes.
fn bytes_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// The key and length of a length-delimited field whose `len` bytes
/// follow.
fn header(buf: &mut Vec<u8>, tag: u32, len: usize) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

fn bytes(buf: &mut Vec<u8>, tag: u32, value: &[u8]) {
    header(buf, tag, value.len());
    buf.extend_from_slice(value);
}

fn varint(buf: &mut Vec<u8>, tag: u32, value: u64) {
    encode_key(tag, WireType::Varint, buf);
    encode_varint(value, buf);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, any_value};
    use opentelemetry_proto::tonic::trace::v1 as proto;
    use prost::Message;

    use super::*;

    fn value(v: any_value::Value) -> Option<AnyValue> {
        Some(AnyValue { value: Some(v) })
    }

    #[test]
    fn a_span_decodes_as_it_was_built() {
        let mut s = Span::new([7; 16], Some([3; 8]), "chat m", Kind::Client, 10, 20);
        s.remote_parent = true;
        s.set("gen_ai.usage.input_tokens", 12u64)
            .set(
                "gen_ai.response.finish_reasons",
                vec!["stop".to_owned(), "length".to_owned()],
            )
            .set("gen_ai.request.temperature", 0.5)
            .set("sluice.stream", true)
            .set("sluice.offset", -3i64)
            .set("gen_ai.response.id", String::from("chatcmpl-1"));
        s.status = Status::Error("upstream answered 503".into());
        let mut root = Span::new(
            [7; 16],
            None,
            "POST /v1/chat/completions",
            Kind::Server,
            5,
            4,
        );
        root.set("http.response.status_code", 200u16);
        let source = Source::new("sluice-test");
        let both = [s.clone(), root];
        let framed = grpc_frame(&source, &both);
        let body = encode(&source, &both);
        assert_eq!(framed[0], 0);
        assert_eq!(
            u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize,
            body.len()
        );
        assert_eq!(&framed[5..], &body[..]);
        let req = ExportTraceServiceRequest::decode(&body[..]).expect("valid protobuf");
        assert_eq!(req.resource_spans.len(), 1);
        let rs = &req.resource_spans[0];
        assert_eq!(rs.schema_url, SCHEMA_URL);
        let resource = rs.resource.as_ref().unwrap();
        assert_eq!(resource.attributes[0].key, "service.name");
        assert_eq!(
            resource.attributes[0].value,
            value(any_value::Value::StringValue("sluice-test".into()))
        );
        assert_eq!(resource.attributes.len(), 6);
        let scope_spans = &rs.scope_spans[0];
        assert_eq!(scope_spans.schema_url, SCHEMA_URL);
        assert_eq!(scope_spans.scope.as_ref().unwrap().name, "sluice");
        assert_eq!(scope_spans.spans.len(), 2);

        let got = &scope_spans.spans[0];
        assert_eq!(got.trace_id, vec![7; 16]);
        assert_eq!(got.span_id, s.span_id.to_vec());
        assert_eq!(got.parent_span_id, vec![3; 8]);
        assert_eq!(got.name, "chat m");
        assert_eq!(got.kind, proto::span::SpanKind::Client as i32);
        assert_eq!(got.flags, 0x301);
        assert_eq!((got.start_time_unix_nano, got.end_time_unix_nano), (10, 20));
        let attrs: Vec<(&str, Option<AnyValue>)> = got
            .attributes
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.clone()))
            .collect();
        assert_eq!(
            attrs,
            [
                (
                    "gen_ai.usage.input_tokens",
                    value(any_value::Value::IntValue(12))
                ),
                (
                    "gen_ai.response.finish_reasons",
                    value(any_value::Value::ArrayValue(ArrayValue {
                        values: vec![
                            AnyValue {
                                value: Some(any_value::Value::StringValue("stop".into()))
                            },
                            AnyValue {
                                value: Some(any_value::Value::StringValue("length".into()))
                            },
                        ]
                    }))
                ),
                (
                    "gen_ai.request.temperature",
                    value(any_value::Value::DoubleValue(0.5))
                ),
                ("sluice.stream", value(any_value::Value::BoolValue(true))),
                ("sluice.offset", value(any_value::Value::IntValue(-3))),
                (
                    "gen_ai.response.id",
                    value(any_value::Value::StringValue("chatcmpl-1".into()))
                ),
            ]
        );
        let status = got.status.as_ref().unwrap();
        assert_eq!(
            (status.code, status.message.as_str()),
            (2, "upstream answered 503")
        );

        let root = &scope_spans.spans[1];
        assert!(root.parent_span_id.is_empty());
        assert_eq!(root.flags, 0x101, "a local root");
        assert_eq!(root.kind, proto::span::SpanKind::Server as i32);
        assert_eq!(
            (root.start_time_unix_nano, root.end_time_unix_nano),
            (5, 5),
            "never ends before it starts"
        );
        assert_eq!(root.status, None);
    }

    #[test]
    fn an_encoder_reused_encodes_each_batch_alone() {
        let source = Source::new("sluice-test");
        let mut encoder = Encoder::new(&source);
        let a = Span::new([1; 16], None, "a", Kind::Internal, 1, 2);
        let b = Span::new([2; 16], None, "b", Kind::Internal, 1, 2);
        let first = encoder.request(&[a.clone(), b], false);
        let second = encoder.request(std::slice::from_ref(&a), false);
        let decoded = ExportTraceServiceRequest::decode(&second[..]).unwrap();
        assert_eq!(decoded.resource_spans[0].scope_spans[0].spans.len(), 1);
        assert_eq!(second, encode(&source, &[a]));
        assert!(first.len() > second.len());
        assert_eq!(
            encode(&source, &[]).len(),
            ExportTraceServiceRequest::decode(&encode(&source, &[])[..])
                .unwrap()
                .encoded_len()
        );
    }
}
