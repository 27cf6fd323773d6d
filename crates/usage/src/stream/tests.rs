use bytes::Bytes;
use proptest::prelude::*;

use super::{StreamScanner, Usage};
use crate::Endpoint;
use crate::WireFormat;

const CHAT_ROLE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#;
const CHAT_TEXT: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello, world"},"finish_reason":null}],"usage":null}"#;
const CHAT_TOOL_START: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}],"usage":null}"#;
const CHAT_TOOL_ARGS: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":\"usage\"}"}}]},"finish_reason":null}],"usage":null}"#;
const CHAT_STOP: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}"#;
const CHAT_USAGE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0}}}"#;

const CHAT_USAGE_SEEN: Usage = Usage {
    prompt_tokens: 12,
    completion_tokens: 5,
    total_tokens: 17,
};

/// An OpenAI chat stream with the usage chunk, in the given separator, with
/// the usage event's bytes apart so that tests can expect it gone.
fn chat_stream(sep: &str) -> (String, String) {
    let event = |data: &str| format!("data: {data}{sep}{sep}");
    let usage = event(CHAT_USAGE);
    let mut stream = [CHAT_ROLE, CHAT_TEXT]
        .into_iter()
        .map(event)
        .collect::<String>();
    stream += &format!(": ping{sep}{sep}");
    stream += &[CHAT_TOOL_START, CHAT_TOOL_ARGS, CHAT_STOP]
        .into_iter()
        .map(event)
        .collect::<String>();
    let before = stream.clone();
    stream += &usage;
    stream += &event("[DONE]");
    let without = before + &event("[DONE]");
    (stream, without)
}

const ANTHROPIC_STREAM: &str = concat!(
    "event: message_start\n",
    r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":4,"cache_read_input_tokens":10,"output_tokens":1}}}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    "\n\n",
    "event: ping\n",
    r#"data: {"type": "ping"}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}"#,
    "\n\n",
    "event: content_block_stop\n",
    r#"data: {"type":"content_block_stop","index":0}"#,
    "\n\n",
    "event: content_block_start\n",
    r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}}"#,
    "\n\n",
    "event: content_block_delta\n",
    r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":\"usage\"}"}}"#,
    "\n\n",
    "event: message_delta\n",
    r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}"#,
    "\n\n",
    "event: message_stop\n",
    r#"data: {"type":"message_stop"}"#,
    "\n\n",
);

const RESPONSES_STREAM: &str = concat!(
    "event: response.created\n",
    r#"data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[],"usage":null}}"#,
    "\n\n",
    "event: response.output_text.delta\n",
    r#"data: {"type":"response.output_text.delta","sequence_number":1,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}"#,
    "\n\n",
    "event: response.completed\n",
    r#"data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{}"}],"usage":{"input_tokens":30,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":39}}}"#,
    "\n\n",
);

/// A stream, how to scan it, and what must come out.
/// Gemini's `streamGenerateContent?alt=sse`: `\r\n` separators, each
/// chunk a whole `GenerateContentResponse` with cumulative usage.
const GEMINI_STREAM: &str = concat!(
    r#"data: {"candidates":[{"content":{"parts":[{"text":"Let me"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":2,"totalTokenCount":33},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
    "\r\n\r\n",
    r#"data: {"candidates":[{"content":{"parts":[{"text":" look."},{"functionCall":{"name":"lookup","args":{"q":"a"}}}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":9,"totalTokenCount":40},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
    "\r\n\r\n",
    r#"data: {"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":31,"candidatesTokenCount":12,"thoughtsTokenCount":20,"totalTokenCount":63},"modelVersion":"gemini-2.5-flash","responseId":"r1"}"#,
    "\r\n\r\n",
);

struct Case {
    format: WireFormat,
    endpoint: Endpoint,
    strip: bool,
    max_event_bytes: usize,
    input: String,
    output: String,
    usage: Option<Usage>,
    tool_calls: u32,
}

fn cases() -> Vec<Case> {
    let chat = |sep: &str, strip: bool| {
        let (stream, without) = chat_stream(sep);
        Case {
            format: WireFormat::Openai,
            endpoint: Endpoint::Chat,
            strip,
            max_event_bytes: super::DEFAULT_MAX_EVENT_BYTES,
            output: if strip { without } else { stream.clone() },
            input: stream,
            usage: Some(CHAT_USAGE_SEEN),
            tool_calls: 1,
        }
    };
    let passthrough = |format, endpoint, stream: &str, usage, tool_calls| Case {
        format,
        endpoint,
        // Stripping is for OpenAI chat only: asking for it elsewhere is a no-op.
        strip: true,
        max_event_bytes: super::DEFAULT_MAX_EVENT_BYTES,
        input: stream.to_owned(),
        output: stream.to_owned(),
        usage: Some(usage),
        tool_calls,
    };
    let mut oversized = chat("\r\n", true);
    // No event fits: all are forwarded and none is scanned.
    oversized.max_event_bytes = 64;
    oversized.output = oversized.input.clone();
    oversized.usage = None;
    oversized.tool_calls = 0;
    vec![
        chat("\n", true),
        chat("\n", false),
        chat("\r\n", true),
        chat("\r\n", false),
        chat("\r", true),
        oversized,
        passthrough(
            WireFormat::Anthropic,
            Endpoint::Messages,
            ANTHROPIC_STREAM,
            Usage {
                prompt_tokens: 39,
                completion_tokens: 42,
                total_tokens: 81,
            },
            1,
        ),
        passthrough(
            WireFormat::Gemini,
            Endpoint::Chat,
            GEMINI_STREAM,
            // Thoughts are output.
            Usage {
                prompt_tokens: 31,
                completion_tokens: 32,
                total_tokens: 63,
            },
            1,
        ),
        passthrough(
            WireFormat::Openai,
            Endpoint::Responses,
            RESPONSES_STREAM,
            Usage {
                prompt_tokens: 30,
                completion_tokens: 9,
                total_tokens: 39,
            },
            1,
        ),
    ]
}

impl Case {
    fn scanner(&self) -> StreamScanner {
        StreamScanner::new(self.format, self.endpoint, self.strip)
            .with_max_event_bytes(self.max_event_bytes)
    }

    /// Feeds the input cut at `cuts` (ascending) and checks everything that
    /// must hold whatever the cuts.
    fn check(&self, cuts: &[usize]) -> Result<(), TestCaseError> {
        let input = Bytes::from(self.input.clone());
        let mut scanner = self.scanner();
        let mut out = Vec::new();
        let mut start = 0;
        for &end in cuts.iter().chain([&input.len()]) {
            let chunk = input.slice(start..end);
            let sent = scanner.feed(chunk.clone());
            if !scanner.strip {
                // Not stripping: the very bytes, at once, not a copy.
                prop_assert_eq!(sent.as_ptr(), chunk.as_ptr());
                prop_assert_eq!(sent.len(), chunk.len());
            }
            // The cap counts line contents; terminators (at most `\r\n\r`
            // before the next byte) come on top.
            prop_assert!(scanner.held.len() <= self.max_event_bytes + 3);
            out.extend_from_slice(&sent);
            start = end;
        }
        out.extend_from_slice(&scanner.finish());
        prop_assert_eq!(String::from_utf8_lossy(&out), self.output.as_str());
        prop_assert_eq!(scanner.usage(), self.usage);
        prop_assert_eq!(scanner.tool_calls(), self.tool_calls);
        Ok(())
    }
}

#[test]
fn every_split_point_gives_the_same_bytes_and_usage() {
    for (n, case) in cases().iter().enumerate() {
        for cut in 0..=case.input.len() {
            if let Err(e) = case.check(&[cut]) {
                panic!("case {n}, cut at {cut}: {e}");
            }
        }
    }
}

proptest! {
    #[test]
    fn random_chunkings_give_the_same_bytes_and_usage(
        case in 0..cases().len(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let case = &cases()[case];
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(case.input.len() + 1)).collect();
        cuts.sort_unstable();
        case.check(&cuts)?;
    }
}

fn feed_all(scanner: &mut StreamScanner, chunks: &[&str]) -> String {
    let mut out = Vec::new();
    for chunk in chunks {
        out.extend_from_slice(&scanner.feed(Bytes::copy_from_slice(chunk.as_bytes())));
    }
    out.extend_from_slice(&scanner.finish());
    String::from_utf8(out).unwrap()
}

#[test]
fn stripping_removes_exactly_the_usage_only_event_and_keeps_done() {
    let (stream, _) = chat_stream("\n");
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let out = feed_all(&mut scanner, &[&stream]);
    assert!(!out.contains(r#""choices":[],"usage""#));
    assert!(out.ends_with("data: [DONE]\n\n"));
    assert_eq!(
        stream.len() - out.len(),
        CHAT_USAGE.len() + "data: \n\n".len()
    );
    assert_eq!(scanner.usage(), Some(CHAT_USAGE_SEEN));
}

#[test]
fn events_go_out_as_soon_as_they_are_complete_when_stripping() {
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let first = format!("data: {CHAT_ROLE}\n\n");
    let sent = scanner.feed(Bytes::from(format!("{first}data: {{\"cho")));
    assert_eq!(sent, first.as_bytes());
    let sent = scanner.feed(Bytes::from_static(b"ices\":[]}\n"));
    assert!(sent.is_empty(), "the event is not complete yet");
    let sent = scanner.feed(Bytes::from_static(b"\n: ping\n\n"));
    // Empty choices but no usage: not the usage chunk, kept.
    assert_eq!(sent, "data: {\"choices\":[]}\n\n: ping\n\n".as_bytes());
    assert_eq!(scanner.usage(), None);
}

#[test]
fn usage_only_event_split_into_many_chunks_is_still_removed() {
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let event = format!("data: {CHAT_USAGE}\n\n");
    for piece in event.as_bytes().chunks(7) {
        assert!(scanner.feed(Bytes::copy_from_slice(piece)).is_empty());
    }
    let out = scanner.feed(Bytes::from_static(b"data: [DONE]\n\n"));
    assert_eq!(out, "data: [DONE]\n\n".as_bytes());
    assert_eq!(scanner.usage(), Some(CHAT_USAGE_SEEN));
}

#[test]
fn data_without_space_multiline_data_and_other_fields() {
    let stream = concat!(
        "id: 7\nevent: chunk\nretry: 100\n",
        "data:{\"choices\":[],\n",
        "data:\"usage\":{\"prompt_tokens\":3,\n",
        "data: \"completion_tokens\":4}}\n",
        "\n",
        "data:[DONE]\n\n",
    );
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let out = feed_all(&mut scanner, &[stream]);
    assert_eq!(out, "data:[DONE]\n\n");
    let usage = Usage {
        prompt_tokens: 3,
        completion_tokens: 4,
        total_tokens: 7,
    };
    assert_eq!(scanner.usage(), Some(usage));
}

#[test]
fn crlf_separators_are_events_boundaries() {
    let (stream, without) = chat_stream("\r\n");
    assert!(stream.contains("\r\n\r\n"));
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    assert_eq!(feed_all(&mut scanner, &[&stream]), without);
    assert_eq!(scanner.usage(), Some(CHAT_USAGE_SEEN));
}

#[test]
fn oversized_event_is_forwarded_unscanned_and_scanning_resumes_after_it() {
    let big = format!(
        "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":999}},\"pad\":\"{}\"}}\n\n",
        "x".repeat(4096)
    );
    let tail = format!("data: {CHAT_USAGE}\n\ndata: [DONE]\n\n");
    let mut scanner =
        StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true).with_max_event_bytes(1024);
    let mut out = Vec::new();
    for piece in big.as_bytes().chunks(100) {
        out.extend_from_slice(&scanner.feed(Bytes::copy_from_slice(piece)));
        assert!(scanner.held.len() <= 1024, "held {}", scanner.held.len());
    }
    // Past the cap, bytes go out as they arrive, before the event ends.
    assert!(out.len() > 4000);
    out.extend_from_slice(&scanner.feed(Bytes::from(tail)));
    out.extend_from_slice(&scanner.finish());
    assert_eq!(String::from_utf8(out).unwrap(), big + "data: [DONE]\n\n");
    assert_eq!(scanner.usage(), Some(CHAT_USAGE_SEEN));
}

#[test]
fn malformed_json_is_forwarded_and_ignored() {
    let stream = concat!(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":-1}}\n\n",
        "data: {\"choices\":{},\"usage\":[]}\n\n",
        "data: \u{fffd}\n\n",
        "data\n\n",
        ":\n\n",
        "data: [DONE]\n\n",
    );
    for (format, endpoint) in [
        (WireFormat::Openai, Endpoint::Chat),
        (WireFormat::Openai, Endpoint::Responses),
        (WireFormat::Anthropic, Endpoint::Messages),
    ] {
        let mut scanner = StreamScanner::new(format, endpoint, true);
        assert_eq!(feed_all(&mut scanner, &[stream]), stream);
        assert_eq!(scanner.usage(), None);
    }
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let invalid = Bytes::from_static(b"data: \xff\xfe{\n\n");
    assert_eq!(scanner.feed(invalid.clone()), invalid);
    assert_eq!(scanner.usage(), None);
}

#[test]
fn finish_flushes_and_scans_an_unfinished_event() {
    let mut scanner = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let cut_off = format!("data: {CHAT_USAGE}");
    assert!(scanner.feed(Bytes::from(cut_off.clone())).is_empty());
    assert_eq!(scanner.finish(), cut_off.as_bytes());
    assert_eq!(scanner.usage(), Some(CHAT_USAGE_SEEN));
    assert!(scanner.finish().is_empty());
}

#[test]
fn usage_is_readable_at_any_point() {
    let mut scanner = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
    let (start, rest) = ANTHROPIC_STREAM.split_at(ANTHROPIC_STREAM.find("event: content").unwrap());
    assert_eq!(scanner.feed(Bytes::from(start)), start.as_bytes());
    let partial = Usage {
        prompt_tokens: 39,
        completion_tokens: 1,
        total_tokens: 40,
    };
    assert_eq!(scanner.usage(), Some(partial));
    assert_eq!(scanner.feed(Bytes::from(rest)), rest.as_bytes());
    assert_eq!(scanner.usage().map(|u| u.completion_tokens), Some(42));
}

#[test]
fn a_cut_stream_is_charged_what_it_streamed_not_its_reservation() {
    // OpenAI chat cut after "Hello, world" (12 characters): the input as
    // estimated, the output as streamed.
    let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, true);
    let _ = feed_all(
        &mut s,
        &[&format!("data: {CHAT_ROLE}\n\ndata: {CHAT_TEXT}\n\n")],
    );
    assert_eq!(s.usage(), None);
    assert_eq!(s.output_chars(), 12);
    let used = s.used_so_far(100, 4);
    assert_eq!(
        used,
        Usage {
            prompt_tokens: 100,
            completion_tokens: 3,
            total_tokens: 103,
        }
    );
    // Anthropic cut after its first text: the input it reported
    // (25 + 4 + 10 cache), the output streamed ("Let me check.", 13
    // characters → 4 tokens) rather than the 1 its `message_start` said.
    let cut = ANTHROPIC_STREAM
        .split("event: content_block_stop")
        .next()
        .unwrap();
    let mut s = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
    let _ = feed_all(&mut s, &[cut]);
    assert_eq!(s.output_chars(), 13);
    assert_eq!(
        s.used_so_far(1_000, 4),
        Usage {
            prompt_tokens: 39,
            completion_tokens: 4,
            total_tokens: 43,
        }
    );
    // `/responses` cut after its first delta.
    let cut = RESPONSES_STREAM
        .split("event: response.completed")
        .next()
        .unwrap();
    let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Responses, false);
    let _ = feed_all(&mut s, &[cut]);
    assert_eq!(s.output_chars(), 2);
    assert_eq!(s.used_so_far(10, 4).total_tokens, 11);
    // Gemini cut after its second chunk: "Let me" and " look." streamed,
    // its cumulative usage so far reported (31 in, 9 out).
    let cut = GEMINI_STREAM.rsplit_once("data: ").unwrap().0;
    let mut s = StreamScanner::new(WireFormat::Gemini, Endpoint::Chat, false);
    let _ = feed_all(&mut s, &[cut]);
    assert_eq!(s.output_chars(), 12);
    assert_eq!(s.used_so_far(1_000, 4).total_tokens, 40);
    // A reported output larger than the text streamed wins.
    let mut s = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
    let _ = feed_all(&mut s, &[ANTHROPIC_STREAM]);
    assert_eq!(s.used_so_far(1_000, 4).completion_tokens, 42);
}

#[test]
fn text_of_an_odd_type_counts_nothing_and_keeps_the_usage() {
    let odd = r#"{"choices":[{"delta":{"content":[1,{"a":"b"}],"refusal":7,"tool_calls":[{"function":{"arguments":null}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#;
    let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, false);
    let _ = feed_all(&mut s, &[&format!("data: {odd}\n\n")]);
    assert_eq!(s.output_chars(), 0);
    assert_eq!(s.usage().map(|u| u.total_tokens), Some(3));
}

#[test]
fn a_stream_tells_its_answers_id_model_and_finish_reasons() {
    let (chat, _) = chat_stream("\n");
    let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, false);
    let _ = feed_all(&mut s, &[&chat]);
    let head = s.head();
    assert_eq!(head.id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(head.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(head.finish_reasons, ["tool_calls"]);

    let mut s = StreamScanner::new(WireFormat::Anthropic, Endpoint::Messages, false);
    let _ = feed_all(&mut s, &[ANTHROPIC_STREAM]);
    let head = s.head();
    assert_eq!(head.id.as_deref(), Some("msg_1"));
    assert_eq!(head.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(head.finish_reasons, ["tool_use"]);

    let mut s = StreamScanner::new(WireFormat::Openai, Endpoint::Chat, false);
    let _ = feed_all(&mut s, &["data: {\"choices\":[{\"delta\":{}}]}\n\n"]);
    assert_eq!(s.head(), &super::AnswerHead::default(), "nothing made up");
}

/// A stream's cached input and reasoning output, read from the events
/// that report them in each format, as a whole answer's are.
#[test]
fn a_streams_details_come_from_its_final_usage() {
    let cases: [(WireFormat, Endpoint, &str, (u64, u64)); 5] = [
        (
            WireFormat::Openai,
            Endpoint::Chat,
            r#"data: {"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}

data: {"choices":[],"usage":{"prompt_tokens":2000,"completion_tokens":300,"total_tokens":2300,"prompt_tokens_details":{"cached_tokens":1024},"completion_tokens_details":{"reasoning_tokens":256}}}

data: [DONE]

"#,
            (1024, 256),
        ),
        (
            WireFormat::Openai,
            Endpoint::Responses,
            r#"data: {"type":"response.output_text.delta","delta":"hi"}

data: {"type":"response.completed","response":{"output":[],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":5}}}}

"#,
            (4, 5),
        ),
        (
            WireFormat::Anthropic,
            Endpoint::Messages,
            r#"event: message_start
data: {"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":700,"output_tokens":1}}}

event: message_delta
data: {"type":"message_delta","usage":{"output_tokens":30}}

"#,
            (700, 0),
        ),
        (
            WireFormat::Gemini,
            Endpoint::Chat,
            r#"data: {"candidates":[{"content":{"parts":[{"text":"hi"}]}}],"usageMetadata":{"promptTokenCount":9}}

data: {"candidates":[{"content":{"parts":[{"text":"!"}]}}],"usageMetadata":{"promptTokenCount":9,"cachedContentTokenCount":6,"candidatesTokenCount":3,"thoughtsTokenCount":7,"totalTokenCount":19}}

"#,
            (6, 7),
        ),
        // Nothing reported: zeros.
        (
            WireFormat::Openai,
            Endpoint::Chat,
            &format!("data: {CHAT_USAGE}\n\ndata: [DONE]\n\n"),
            (0, 0),
        ),
    ];
    for (format, endpoint, stream, (cached, reasoning)) in cases {
        let mut scanner = StreamScanner::new(format, endpoint, false);
        for piece in stream.as_bytes().chunks(7) {
            let _ = scanner.feed(Bytes::copy_from_slice(piece));
        }
        let _ = scanner.finish();
        let d = scanner.details();
        assert_eq!(
            (d.cached_tokens, d.reasoning_tokens),
            (cached, reasoning),
            "{format:?} {endpoint:?}"
        );
        assert!(scanner.usage().is_some(), "{format:?}");
    }
}
