//! Request traces: one JSON line per request in
//! `{trace_dir}/{workspace}/{thread}.jsonl`, written in the background and
//! flushed at shutdown.

mod common;

use common::{Harness, chat};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::trace::{TraceRecord, trace_path};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_of_a_thread_is_one_line_of_its_file() {
    let mut h = Harness::start().await;
    let send = |path: &'static str, body: Value, id: &'static str| {
        h.post(path, &body)
            .header("x-sluice-workspace", "acme")
            .header("x-sluice-thread", "thread-7")
            .header("x-request-id", id)
            .header("authorization", "Bearer sk-never-written")
            .send()
    };
    let res = send("/v1/chat/completions", chat("openai/gpt-4o"), "t-1")
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    let mut streamed = chat("openai/gpt-4o-mini");
    streamed["stream"] = json!(true);
    let res = send("/v1/chat/completions", streamed, "t-2").await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    let res = send(
        "/v1/messages",
        json!({
            "model": "anthropic/claude-sonnet-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        }),
        "t-3",
    )
    .await
    .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();
    // Another thread's request goes to another file.
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o"))
        .header("x-sluice-workspace", "acme")
        .header("x-sluice-thread", "thread-8")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.bytes().await.unwrap();

    h.shutdown().await;
    let path = trace_path(&h.trace_dir, "acme", "thread-7");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!text.contains("sk-never-written"), "a key in a trace");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let mut ids = Vec::new();
    for line in lines {
        let raw: Value = serde_json::from_str(line).unwrap();
        for field in ["trace_id", "total_ms", "model", "spans", "route", "status"] {
            assert!(!raw[field].is_null(), "{field} in {line}");
        }
        let t: TraceRecord = serde_json::from_str(line).unwrap();
        assert_eq!(t.trace_id.len(), 32, "{line}");
        assert_eq!(
            (t.workspace.as_str(), t.thread.as_str()),
            ("acme", "thread-7")
        );
        assert_eq!(t.status, 200);
        assert!(t.total_ms >= 0.0);
        assert!(t.model.is_some(), "{line}");
        assert!(!t.spans.is_empty(), "spans in {line}");
        assert!(t.spans.iter().any(|s| s.name == "upstream"), "{line}");
        ids.push(t.request_id);
    }
    ids.sort();
    assert_eq!(ids, ["t-1", "t-2", "t-3"]);
    let other = std::fs::read_to_string(trace_path(&h.trace_dir, "acme", "thread-8")).unwrap();
    assert_eq!(other.lines().count(), 1);
    h.stop().await;
}
