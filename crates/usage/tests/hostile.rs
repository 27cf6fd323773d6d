//! Hostile bytes: whatever an upstream sends (any bytes, cut anywhere,
//! events far over the size cap) or a client sends (any JSON), the usage
//! code never panics, a stream it does not strip passes through byte for
//! byte, and estimates stay consistent.
//!
//! `PROPTEST_CASES` raises the number of cases (the long run by hand is in
//! `docs/reliability.md`).

use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Map, Value};
use sluice_usage::{Endpoint, StreamScanner, WireFormat, estimate, from_body, tool_calls};

const FORMATS: [(WireFormat, Endpoint); 4] = [
    (WireFormat::Openai, Endpoint::Chat),
    (WireFormat::Openai, Endpoint::Responses),
    (WireFormat::Openai, Endpoint::Embeddings),
    (WireFormat::Anthropic, Endpoint::Messages),
];

/// The fields the estimate and the extraction read.
const FIELDS: &[&str] = &[
    "model",
    "messages",
    "input",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "n",
    "tools",
    "system",
    "instructions",
    "content",
    "prompt",
    "type",
    "text",
    "usage",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "choices",
    "delta",
    "tool_calls",
    "role",
];

/// Bytes that look like a stream often enough to reach the parsers:
/// `data:` lines with JSON fragments, blank lines, CRs, and noise.
fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"event: message_delta\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b":keep-alive\n".to_vec()),
        Just(b"data: [DONE]\n\n".to_vec()),
        Just(
            br#"{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"choices":[]}"#
                .to_vec()
        ),
        Just(
            br#"{"type":"message_delta","usage":{"output_tokens":18446744073709551615}}"#.to_vec()
        ),
        Just(br#"{"type":"response.completed","response":{"usage":{"input_tokens":-1}}}"#.to_vec()),
        "[{}\\[\\]\":,a-z0-9 ]{0,30}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..64),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

/// Any JSON, with the fields the code reads as keys most of the time.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
    ];
    let key = prop_oneof![
        4 => prop::sample::select(FIELDS).prop_map(str::to_owned),
        1 => "\\PC{0,8}",
    ];
    leaf.prop_recursive(5, 96, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_stream_of_any_bytes_cut_anywhere_never_panics(
        input in stream_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
        format in 0..FORMATS.len(),
        strip in any::<bool>(),
        cap in prop_oneof![Just(16_usize), Just(256), Just(1 << 20)],
    ) {
        let (format, endpoint) = FORMATS[format];
        let mut scanner = StreamScanner::new(format, endpoint, strip).with_max_event_bytes(cap);
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        cuts.sort_unstable();
        let mut out = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([input.len()]) {
            out.extend_from_slice(&scanner.feed(Bytes::copy_from_slice(&input[from..cut])));
            from = cut;
        }
        out.extend_from_slice(&scanner.finish());
        let _ = scanner.usage();
        if !(strip && format == WireFormat::Openai && endpoint == Endpoint::Chat) {
            prop_assert_eq!(out, input, "a stream that is not stripped passes unchanged");
        }
    }

    #[test]
    fn a_body_of_any_bytes_never_panics(body in stream_bytes(), format in 0..FORMATS.len()) {
        let (format, endpoint) = FORMATS[format];
        let _ = from_body(format, endpoint, &body);
        let _ = tool_calls(format, &body);
    }

    #[test]
    fn any_json_is_estimated_and_read(
        value in json(),
        format in 0..FORMATS.len(),
        chars_per_token in prop_oneof![Just(0_u64), Just(1), Just(4), Just(u64::MAX)],
        default_max in prop_oneof![Just(0_u64), Just(4_096), Just(u64::MAX)],
    ) {
        let (format, endpoint) = FORMATS[format];
        let e = estimate(format, endpoint, &value, chars_per_token, default_max);
        prop_assert_eq!(e.total, e.prompt_tokens.saturating_add(e.max_completion_tokens));
        let body = value.to_string();
        let _ = from_body(format, endpoint, body.as_bytes());
        let _ = tool_calls(format, body.as_bytes());
    }
}
