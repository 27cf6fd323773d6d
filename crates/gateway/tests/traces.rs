//! Request traces: one JSON line per request in
//! `{trace_dir}/{workspace}/{period}.jsonl`, written in the background and
//! flushed at shutdown; the thread is a field, never a file; requests
//! refused before admission are not traced.

mod common;

use std::path::{Path, PathBuf};

use common::{Harness, chat, model_limits, sim_config};
use futures_util::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::trace::{TraceRecord, workspace_files};

/// Every line of `workspace`'s trace files, oldest file first.
fn traces(dir: &Path, workspace: &str) -> Vec<TraceRecord> {
    workspace_files(dir, workspace)
        .unwrap()
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect::<Vec<TraceRecord>>()
        })
        .collect()
}

/// Every file under `dir`, recursively; none if it does not exist.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

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
    let files = workspace_files(&h.trace_dir, "acme").unwrap();
    assert_eq!(files.len(), 1, "one file for the workspace: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(!text.contains("sk-never-written"), "a key in a trace");
    let mut ids = Vec::new();
    let mut lines = 0;
    for line in text.lines() {
        let raw: Value = serde_json::from_str(line).unwrap();
        for field in ["trace_id", "total_ms", "model", "spans", "route", "status"] {
            assert!(!raw[field].is_null(), "{field} in {line}");
        }
        let t: TraceRecord = serde_json::from_str(line).unwrap();
        lines += 1;
        if t.thread != "thread-7" {
            continue;
        }
        assert_eq!(t.trace_id.len(), 32, "{line}");
        assert_eq!(t.workspace, "acme");
        assert_eq!(t.status, 200);
        assert!(t.total_ms >= 0.0);
        assert!(t.model.is_some(), "{line}");
        assert!(!t.spans.is_empty(), "spans in {line}");
        assert!(t.spans.iter().any(|s| s.name == "upstream"), "{line}");
        ids.push(t.request_id);
    }
    assert_eq!(lines, 4, "{text}");
    ids.sort();
    assert_eq!(ids, ["t-1", "t-2", "t-3"]);
    let other = traces(&h.trace_dir, "acme")
        .into_iter()
        .filter(|t| t.thread == "thread-8")
        .count();
    assert_eq!(other, 1);
    h.stop().await;
}

/// The hole: 50k requests with fresh `x-sluice-thread` values used to make
/// 50k files. Now they share their workspace's file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_threads_make_no_files_of_their_own() {
    const REQUESTS: usize = 5_000;
    let mut h = Harness::with(sim_config(), |c| {
        let mut unlimited = model_limits("");
        unlimited.requests_per_second = 1e9;
        unlimited.burst = 1_000_000;
        c.models = vec![unlimited];
        c.trace.buffer = REQUESTS;
    })
    .await;
    let body = chat("openai/gpt-4o");
    let statuses: Vec<StatusCode> = futures_util::stream::iter(0..REQUESTS)
        .map(|i| {
            let req = h
                .post("/v1/chat/completions", &body)
                .header(
                    "x-sluice-workspace",
                    if i % 2 == 0 { "acme" } else { "globex" },
                )
                .header("x-sluice-thread", format!("fresh-{i}"));
            async move {
                let res = req.send().await.unwrap();
                let status = res.status();
                res.bytes().await.unwrap();
                status
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert!(statuses.iter().all(|s| *s == StatusCode::OK));
    h.shutdown().await;
    let files = files_under(&h.trace_dir);
    // One file per workspace per day: two, or four if the run crossed
    // midnight (UTC).
    assert!((2..=4).contains(&files.len()), "{files:?}");
    let acme = traces(&h.trace_dir, "acme");
    let globex = traces(&h.trace_dir, "globex");
    assert_eq!(acme.len() + globex.len(), REQUESTS);
    let mut threads: Vec<_> = acme
        .iter()
        .chain(&globex)
        .map(|t| t.thread.clone())
        .collect();
    threads.sort();
    threads.dedup();
    assert_eq!(threads.len(), REQUESTS, "every thread is in a line");
    h.stop().await;
}

/// Refused before admission (bad body, unknown model or API, bad key,
/// body too large): counted in `sluice_requests_total`, never written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_refused_before_admission_write_no_traces() {
    let mut h = Harness::with(sim_config(), |c| c.max_body_bytes = 1_000).await;
    let refused: Vec<(&str, reqwest::Body)> = vec![
        ("/v1/chat/completions", "{not json".into()),
        ("/v1/chat/completions", r#"{"messages": []}"#.into()),
        ("/v1/chat/completions", r#"{"model": "nobody/x"}"#.into()),
        ("/v1/messages", r#"{"model": "nobody/x"}"#.into()),
        ("/v1/chat/completions", "x".repeat(2_000).into()),
        ("/proxy/nowhere/x", "{}".into()),
    ];
    for (i, (path, body)) in refused.into_iter().enumerate() {
        let res = h
            .http
            .post(h.url(path))
            .header("content-type", "application/json")
            .header("x-sluice-workspace", format!("ws-{i}"))
            .header("x-sluice-thread", format!("fresh-{i}"))
            .body(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        assert!([400, 404, 413].contains(&status), "{path}: {status}");
    }
    // A header the gateway refuses.
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o"))
        .header("x-sluice-thread", "fresh-x")
        .header("x-sluice-priority", "urgent!")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    h.shutdown().await;
    assert_eq!(files_under(&h.trace_dir), Vec::<PathBuf>::new());
    h.stop().await;
}

/// With tenants, a caller without a key is refused before anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_requests_write_no_traces() {
    let mut h = Harness::with(sim_config(), |c| {
        c.tenants.push(sluice_gateway::config::TenantConfig::new(
            "acme", "key-acme",
        ));
    })
    .await;
    for key in [None, Some("wrong")] {
        let mut req = h
            .post("/v1/chat/completions", &chat("openai/gpt-4o"))
            .header("x-sluice-thread", "fresh");
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        let res = req.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    h.shutdown().await;
    assert_eq!(files_under(&h.trace_dir), Vec::<PathBuf>::new());
    h.stop().await;
}
