use serde_json::json;
use sluice_otel::{Kind, Span, Value};
use sluice_usage::{Endpoint, Usage};

use super::genai::{ModelCall, answered, head_of};
use super::without_query;

fn span() -> Span {
    Span::new([1; 16], None, "x", Kind::Client, 1, 2)
}

#[test]
fn a_model_call_names_its_operation_provider_and_request() {
    let url: reqwest::Url = "https://generativelanguage.example/v1beta/models/g:generateContent"
        .parse()
        .unwrap();
    let body = json!({"model": "google/gemini-2.0-flash", "max_completion_tokens": 64,
        "top_p": 0.9, "seed": 7, "n": 2});
    let call = ModelCall {
        endpoint: Endpoint::Chat,
        provider: "google",
        model: "google/gemini-2.0-flash",
        upstream_model: "gemini-2.0-flash",
        url: &url,
        body: &body,
        stream: false,
    };
    assert_eq!(call.span_name(), "chat gemini-2.0-flash");
    let mut s = span();
    call.describe(&mut s);
    assert_eq!(
        s.get("gen_ai.provider.name"),
        Some(&Value::from("gcp.gemini"))
    );
    assert_eq!(s.get("gen_ai.system"), Some(&Value::from("gcp.gemini")));
    assert_eq!(s.get("gen_ai.request.max_tokens"), Some(&Value::Int(64)));
    assert_eq!(s.get("gen_ai.request.top_p"), Some(&Value::Double(0.9)));
    assert_eq!(s.get("gen_ai.request.seed"), Some(&Value::Int(7)));
    assert_eq!(s.get("gen_ai.request.choice.count"), Some(&Value::Int(2)));
    assert_eq!(s.get("server.port"), Some(&Value::Int(443)));
    assert_eq!(s.get("gen_ai.request.temperature"), None, "not asked");
}

#[test]
fn an_answer_gives_its_model_id_reasons_and_usage() {
    let usage = Usage {
        prompt_tokens: 12,
        completion_tokens: 9,
        total_tokens: 21,
    };
    let mut s = span();
    let anthropic = br#"{"id":"msg_1","model":"claude-x","stop_reason":"end_turn","content":[]}"#;
    answered(&mut s, Some(usage), head_of(anthropic));
    assert_eq!(
        s.get("gen_ai.response.model"),
        Some(&Value::from("claude-x"))
    );
    assert_eq!(
        s.get("gen_ai.response.finish_reasons"),
        Some(&Value::Strs(vec!["end_turn".into()]))
    );
    assert_eq!(s.get("gen_ai.usage.input_tokens"), Some(&Value::Int(12)));
    assert_eq!(s.get("gen_ai.usage.output_tokens"), Some(&Value::Int(9)));
    let mut s = span();
    assert_eq!(head_of(b"not json"), None);
    answered(&mut s, None, head_of(br#"{"object":"list"}"#));
    assert!(s.attributes.is_empty(), "nothing made up");
}

#[test]
fn a_url_loses_its_query_and_credentials() {
    let url: reqwest::Url = "https://user:pw@api.example/v1/x?key=secret"
        .parse()
        .unwrap();
    assert_eq!(without_query(&url), "https://api.example/v1/x");
}
