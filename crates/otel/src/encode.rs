//! Spans into OTLP's `ExportTraceServiceRequest`, encoded with the prost
//! types of `opentelemetry-proto`, and the 5-byte framing of a gRPC
//! message.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, any_value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{self as proto, ResourceSpans, ScopeSpans};
use prost::Message;

use crate::span::{Kind, Span, Status, Value};

/// The semantic conventions the attribute names follow.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

/// W3C trace flag `sampled`: every exported span was sampled.
const SAMPLED: u32 = 0x01;

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
    request(source, spans).encode_to_vec()
}

/// `spans` as one gRPC message: a zero byte (not compressed), the
/// message's length as four big-endian bytes, then the message.
pub fn grpc_frame(source: &Source, spans: &[Span]) -> Vec<u8> {
    let message = request(source, spans);
    let len = message.encoded_len();
    let mut out = Vec::with_capacity(5 + len);
    out.push(0);
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message
        .encode(&mut out)
        .expect("a Vec grows to hold any message");
    out
}

fn request(source: &Source, spans: &[Span]) -> ExportTraceServiceRequest {
    let resource = Resource {
        attributes: vec![
            kv("service.name", string(&source.service_name)),
            kv("service.version", string(&source.service_version)),
            kv("service.instance.id", string(&source.instance_id)),
            kv("telemetry.sdk.name", string("sluice")),
            kv("telemetry.sdk.language", string("rust")),
            kv("telemetry.sdk.version", string(env!("CARGO_PKG_VERSION"))),
        ],
        ..Default::default()
    };
    let scope = InstrumentationScope {
        name: "sluice".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(resource),
            scope_spans: vec![ScopeSpans {
                scope: Some(scope),
                spans: spans.iter().map(span).collect(),
                schema_url: SCHEMA_URL.into(),
            }],
            schema_url: SCHEMA_URL.into(),
        }],
    }
}

fn span(s: &Span) -> proto::Span {
    let flags = SAMPLED
        | proto::SpanFlags::ContextHasIsRemoteMask as u32
        | if s.remote_parent {
            proto::SpanFlags::ContextIsRemoteMask as u32
        } else {
            0
        };
    let kind = match s.kind {
        Kind::Internal => proto::span::SpanKind::Internal,
        Kind::Server => proto::span::SpanKind::Server,
        Kind::Client => proto::span::SpanKind::Client,
        Kind::Producer => proto::span::SpanKind::Producer,
        Kind::Consumer => proto::span::SpanKind::Consumer,
    };
    let status = match &s.status {
        Status::Unset => None,
        Status::Error(message) => Some(proto::Status {
            message: message.clone(),
            code: proto::status::StatusCode::Error as i32,
        }),
    };
    proto::Span {
        trace_id: s.trace_id.to_vec(),
        span_id: s.span_id.to_vec(),
        parent_span_id: s.parent.map(|p| p.to_vec()).unwrap_or_default(),
        flags,
        name: s.name.to_string(),
        kind: kind as i32,
        start_time_unix_nano: s.start_unix_nanos,
        end_time_unix_nano: s.end_unix_nanos.max(s.start_unix_nanos),
        attributes: s.attributes.iter().map(|(k, v)| kv(k, value(v))).collect(),
        status,
        ..Default::default()
    }
}

fn kv(key: &str, value: AnyValue) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(value),
        ..Default::default()
    }
}

fn string(s: &str) -> AnyValue {
    AnyValue {
        value: Some(any_value::Value::StringValue(s.to_owned())),
    }
}

fn value(v: &Value) -> AnyValue {
    let value = match v {
        Value::Str(s) => any_value::Value::StringValue(s.to_string()),
        Value::Int(n) => any_value::Value::IntValue(*n),
        Value::Double(n) => any_value::Value::DoubleValue(*n),
        Value::Bool(b) => any_value::Value::BoolValue(*b),
        Value::Strs(list) => any_value::Value::ArrayValue(ArrayValue {
            values: list.iter().map(|s| string(s)).collect(),
        }),
    };
    AnyValue { value: Some(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_decodes_as_it_was_built() {
        let mut s = Span::new([7; 16], Some([3; 8]), "chat m", Kind::Client, 10, 20);
        s.remote_parent = true;
        s.set("gen_ai.usage.input_tokens", 12u64)
            .set("gen_ai.response.finish_reasons", vec!["stop".to_owned()]);
        s.status = Status::Error("upstream answered 503".into());
        let source = Source::new("sluice-test");
        let framed = grpc_frame(&source, std::slice::from_ref(&s));
        let body = encode(&source, std::slice::from_ref(&s));
        assert_eq!(framed[0], 0);
        assert_eq!(
            u32::from_be_bytes(framed[1..5].try_into().unwrap()) as usize,
            body.len()
        );
        assert_eq!(&framed[5..], &body[..]);
        let req = ExportTraceServiceRequest::decode(&body[..]).expect("valid protobuf");
        let rs = &req.resource_spans[0];
        let service = &rs.resource.as_ref().unwrap().attributes[0];
        assert_eq!(service.key, "service.name");
        let got = &rs.scope_spans[0].spans[0];
        assert_eq!(got.trace_id, vec![7; 16]);
        assert_eq!(got.parent_span_id, vec![3; 8]);
        assert_eq!(got.kind, proto::span::SpanKind::Client as i32);
        assert_eq!(got.flags, 0x301);
        assert_eq!((got.start_time_unix_nano, got.end_time_unix_nano), (10, 20));
        assert_eq!(got.attributes[0].key, "gen_ai.usage.input_tokens");
        assert_eq!(
            got.attributes[0].value.as_ref().unwrap().value,
            Some(any_value::Value::IntValue(12))
        );
        assert_eq!(got.status.as_ref().unwrap().code, 2);
    }
}
