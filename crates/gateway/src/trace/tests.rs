use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "sluice-trace-test-{}-{}-{:x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(workspace: &str, thread: &str, request_id: &str) -> TraceRecord {
    let mut t = Trace::start(request_id, workspace, thread, "/v1/chat/completions");
    t.status = 200;
    t.finish()
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn spans_are_relative_to_the_trace_start() {
    let mut t = Trace::start("r1", "acme", "t1", "/v1/chat/completions");
    tokio::time::advance(Duration::from_millis(5)).await;
    let queue = t.open_span("queue");
    tokio::time::advance(Duration::from_millis(20)).await;
    t.close_span(queue, Map::new());
    let start = tokio::time::Instant::now();
    tokio::time::advance(Duration::from_millis(100)).await;
    let mut meta = Map::new();
    meta.insert("attempt".into(), json!(1));
    meta.insert("status".into(), json!(200));
    meta.insert("provider".into(), json!("openai"));
    t.record_span("upstream", start, tokio::time::Instant::now(), meta);
    let abandoned = t.open_span("stream");
    drop(abandoned);
    t.model = Some("openai/gpt-4o".into());
    t.usage = Some(Usage {
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
    });
    t.attempts = 1;
    t.status = 200;
    let r = t.finish();
    assert_eq!(r.total_ms, 125.0);
    assert_eq!(r.spans.len(), 2);
    assert_eq!((r.spans[0].start_ms, r.spans[0].duration_ms), (5.0, 20.0));
    assert_eq!((r.spans[1].start_ms, r.spans[1].duration_ms), (25.0, 100.0));
    assert_eq!(r.spans[1].metadata["provider"], "openai");
    assert_eq!(r.trace_id.len(), 32);
    let v = serde_json::to_value(&r).unwrap();
    for key in [
        "trace_id",
        "request_id",
        "workspace",
        "thread",
        "route",
        "model",
        "total_ms",
        "status",
        "attempts",
        "tool_calls",
        "usage",
        "error",
        "spans",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert!(v.get("headers").is_none());
    assert_eq!(v["usage"]["total_tokens"], 15);
}

#[tokio::test]
async fn records_land_in_their_thread_file_in_order() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 64);
    for i in 0..20 {
        let thread = if i % 2 == 0 { "even" } else { "odd" };
        assert!(writer.submit(record("acme", thread, &format!("r{i}"))));
        if i % 5 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert!(writer.submit(record("other", "even", "x")));
    task.shutdown().await;

    let even = lines(&dir.0.join("acme/even.jsonl"));
    let ids: Vec<_> = even
        .iter()
        .map(|v| v["request_id"].as_str().unwrap())
        .collect();
    let expected: Vec<_> = (0..20).step_by(2).map(|i| format!("r{i}")).collect();
    assert_eq!(ids, expected);
    assert!(
        even.iter()
            .all(|v| v["thread"] == "even" && v["workspace"] == "acme")
    );
    assert_eq!(lines(&dir.0.join("acme/odd.jsonl")).len(), 10);
    assert_eq!(lines(&dir.0.join("other/even.jsonl")).len(), 1);
    assert_eq!(writer.dropped(), 0);
}

#[tokio::test]
async fn appends_to_existing_files() {
    let dir = TempDir::new();
    for round in 0..2 {
        let (writer, task) = TraceWriter::spawn(dir.0.clone(), 8);
        assert!(writer.submit(record("acme", "t", &format!("round{round}"))));
        task.shutdown().await;
    }
    assert_eq!(lines(&dir.0.join("acme/t.jsonl")).len(), 2);
}

// The default test runtime has one thread and the writer task cannot run
// until the test yields, so the buffer fills up: submits must return at
// once and count the drops.
#[tokio::test]
async fn a_full_buffer_drops_and_counts() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 2);
    let accepted = (0..10)
        .filter(|i| writer.submit(record("acme", "t", &format!("r{i}"))))
        .count();
    assert_eq!(accepted, 2);
    assert_eq!(writer.dropped(), 8);
    task.shutdown().await;
    let ids: Vec<_> = lines(&dir.0.join("acme/t.jsonl"))
        .iter()
        .map(|v| v["request_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["r0", "r1"]);
}

#[tokio::test]
async fn hostile_names_stay_inside_dir() {
    let dir = TempDir::new();
    let root = dir.0.join("traces");
    let (writer, task) = TraceWriter::spawn(root.clone(), 16);
    let hostile = [
        ("..", "../../escaped"),
        ("../..", "x"),
        ("/tmp", "/etc/passwd"),
        ("a/../../b", "c\0d\ne"),
        ("", ""),
        (".", "."),
    ];
    for (ws, thread) in hostile {
        assert!(writer.submit(record(ws, thread, "r")));
    }
    task.shutdown().await;
    // Nothing next to `traces`, everything two levels below it.
    let outside: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(outside, ["traces"]);
    let files = files_under(&root);
    assert_eq!(files.len(), hostile.len());
    for f in &files {
        assert_eq!(
            f.strip_prefix(&root).unwrap().components().count(),
            2,
            "{f:?}"
        );
        assert_eq!(lines(f).len(), 1);
    }
}

#[tokio::test]
async fn shutdown_writes_everything_queued() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 1000);
    // Queued without yielding: nothing is written before shutdown.
    for i in 0..500 {
        assert!(writer.submit(record(&format!("ws{}", i % 3), &format!("t{}", i % 7), "r")));
    }
    task.shutdown().await;
    let total: usize = files_under(&dir.0).iter().map(|f| lines(f).len()).sum();
    assert_eq!(total, 500);
    // Intake is closed: later traces are dropped, not queued forever.
    assert!(!writer.submit(record("ws0", "t0", "late")));
    assert_eq!(writer.dropped(), 1);
}

#[tokio::test]
async fn more_threads_than_open_files() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 1000);
    for round in 0..2 {
        for i in 0..300 {
            assert!(writer.submit(record("acme", &format!("t{i}"), &format!("{round}"))));
        }
        tokio::task::yield_now().await;
    }
    task.shutdown().await;
    let files = files_under(&dir.0);
    assert_eq!(files.len(), 300);
    assert!(files.iter().all(|f| lines(f).len() == 2));
}

#[tokio::test]
async fn join_ends_when_every_writer_is_dropped() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 8);
    let clone = writer.clone();
    assert!(writer.submit(record("acme", "t", "a")));
    assert!(clone.submit(record("acme", "t", "b")));
    drop((writer, clone));
    task.join().await;
    assert_eq!(lines(&dir.0.join("acme/t.jsonl")).len(), 2);
}

#[tokio::test]
async fn a_write_error_does_not_stop_the_writer() {
    let dir = TempDir::new();
    // A file where the workspace directory should be.
    std::fs::write(dir.0.join("blocked"), b"").unwrap();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 8);
    assert!(writer.submit(record("blocked", "t", "lost")));
    tokio::task::yield_now().await;
    assert!(writer.submit(record("acme", "t", "kept")));
    task.shutdown().await;
    assert_eq!(lines(&dir.0.join("acme/t.jsonl")).len(), 1);
}
