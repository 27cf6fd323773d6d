use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::writer::{BATCH, LINGER};
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

/// A record that started at `unix_ms`.
fn record_at(workspace: &str, request_id: &str, unix_ms: u64) -> TraceRecord {
    let mut r = record(workspace, "t", request_id);
    r.started_unix_ms = unix_ms;
    // Lines of one length, for the tests that count bytes.
    r.total_ms = 0.5;
    r
}

/// 2025-01-31T00:00:00Z.
const DAY0: u64 = 1_738_281_600_000;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;

fn retention() -> Retention {
    crate::config::TraceConfig::default().retention()
}

fn spawn(dir: &Path, buffer: usize) -> (TraceWriter, TraceWriterTask) {
    TraceWriter::spawn(dir.to_owned(), buffer, retention())
}

/// Every line of `workspace`'s files, oldest file first.
fn workspace_lines(dir: &Path, workspace: &str) -> Vec<Value> {
    workspace_files(dir, workspace)
        .unwrap()
        .iter()
        .flat_map(|f| lines(f))
        .collect()
}

fn request_ids(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|v| v["request_id"].as_str().unwrap().to_owned())
        .collect()
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
async fn records_land_in_their_workspace_file_in_order() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 64);
    for i in 0..20 {
        let thread = if i % 2 == 0 { "even" } else { "odd" };
        assert!(writer.submit(record("acme", thread, &format!("r{i}"))));
        if i % 5 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert!(writer.submit(record("other", "even", "x")));
    task.shutdown().await;

    assert_eq!(workspace_files(&dir.0, "acme").unwrap().len(), 1);
    let acme = workspace_lines(&dir.0, "acme");
    let expected: Vec<_> = (0..20).map(|i| format!("r{i}")).collect();
    assert_eq!(request_ids(&acme), expected);
    // The thread is a field of the line.
    assert!(acme.iter().all(|v| v["workspace"] == "acme"));
    assert_eq!(acme.iter().filter(|v| v["thread"] == "even").count(), 10);
    assert_eq!(workspace_lines(&dir.0, "other").len(), 1);
    assert_eq!(writer.dropped(), 0);
}

#[tokio::test]
async fn appends_to_existing_files() {
    let dir = TempDir::new();
    for round in 0..2 {
        let (writer, task) = spawn(&dir.0, 8);
        assert!(writer.submit(record_at("acme", &format!("round{round}"), DAY0)));
        task.shutdown().await;
    }
    let files = workspace_files(&dir.0, "acme").unwrap();
    assert_eq!(files.len(), 1);
    assert!(files[0].ends_with("acme/2025-01-31.jsonl"), "{files:?}");
    assert_eq!(request_ids(&lines(&files[0])), ["round0", "round1"]);
}

// The default test runtime has one thread and the writer task cannot run
// until the test yields, so the buffer fills up: submits must return at
// once and count the drops.
#[tokio::test]
async fn a_full_buffer_drops_and_counts() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 2);
    let accepted = (0..10)
        .filter(|i| writer.submit(record("acme", "t", &format!("r{i}"))))
        .count();
    assert_eq!(accepted, 2);
    assert_eq!(writer.dropped(), 8);
    task.shutdown().await;
    assert_eq!(request_ids(&workspace_lines(&dir.0, "acme")), ["r0", "r1"]);
}

#[tokio::test]
async fn hostile_names_stay_inside_dir() {
    let dir = TempDir::new();
    let root = dir.0.join("traces");
    let (writer, task) = spawn(&root, 16);
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

// The writer sleeps through its linger without watching the queue; a
// round's worth queued meanwhile wakes it. The clock is paused and the
// test never idles the runtime while it waits, so the clock stands still:
// the traces come out before the linger could have ended.
#[tokio::test(start_paused = true)]
async fn a_full_round_ends_the_linger() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 1000);
    assert!(writer.submit(record("acme", "t", "first")));
    // The writer takes the first trace and lingers.
    tokio::time::sleep(Duration::from_millis(1)).await;
    let lingering = tokio::time::Instant::now();
    for i in 0..BATCH {
        assert!(writer.submit(record("acme", "t", &format!("r{i}"))));
    }
    let mut written = 0;
    for _ in 0..5_000 {
        written = workspace_files(&dir.0, "acme")
            .map_or(0, |files| files.iter().map(|f| lines(f).len()).sum());
        if written >= BATCH {
            break;
        }
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(written, BATCH, "one full round, the first trace included");
    assert!(lingering.elapsed() < LINGER);
    task.shutdown().await;
    assert_eq!(workspace_lines(&dir.0, "acme").len(), BATCH + 1);
}

// A round that is not full waits out its linger (traces that join it do
// not end it), then goes out whole.
#[tokio::test(start_paused = true)]
async fn a_partial_round_waits_out_the_linger() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 1000);
    let start = tokio::time::Instant::now();
    assert!(writer.submit(record("acme", "t", "a")));
    tokio::time::sleep(LINGER / 2).await;
    assert!(writer.submit(record("acme", "t", "b")));
    tokio::time::sleep(LINGER / 2 - Duration::from_millis(1)).await;
    assert!(
        workspace_lines(&dir.0, "acme").is_empty(),
        "written before the linger ended"
    );
    let mut written = Vec::new();
    for _ in 0..1_000 {
        written = workspace_lines(&dir.0, "acme");
        if written.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(request_ids(&written), ["a", "b"]);
    assert!(start.elapsed() >= LINGER);
    task.shutdown().await;
}

#[tokio::test]
async fn shutdown_writes_everything_queued() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 1000);
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
async fn more_workspaces_than_open_files() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        1000,
        Retention {
            max_open_files: 4,
            ..retention()
        },
    );
    for round in 0..2 {
        for i in 0..30 {
            assert!(writer.submit(record_at(&format!("ws{i}"), &format!("{round}"), DAY0)));
        }
        tokio::task::yield_now().await;
    }
    task.shutdown().await;
    let files = files_under(&dir.0);
    assert_eq!(files.len(), 30);
    assert!(files.iter().all(|f| lines(f).len() == 2));
}

#[tokio::test]
async fn join_ends_when_every_writer_is_dropped() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 8);
    let clone = writer.clone();
    assert!(writer.submit(record("acme", "t", "a")));
    assert!(clone.submit(record("acme", "t", "b")));
    drop((writer, clone));
    task.join().await;
    assert_eq!(workspace_lines(&dir.0, "acme").len(), 2);
}

#[tokio::test]
async fn a_write_error_does_not_stop_the_writer() {
    let dir = TempDir::new();
    // A file where the workspace directory should be.
    std::fs::write(dir.0.join("blocked"), b"").unwrap();
    let (writer, task) = spawn(&dir.0, 8);
    assert!(writer.submit(record("blocked", "t", "lost")));
    tokio::task::yield_now().await;
    assert!(writer.submit(record("acme", "t", "kept")));
    task.shutdown().await;
    assert_eq!(workspace_lines(&dir.0, "acme").len(), 1);
    assert_eq!(files_under(&dir.0).len(), 2, "the blocking file and acme's");
}

/// The hole this layout closes: every fresh `x-sluice-thread` used to be
/// a file of its own.
#[tokio::test]
async fn fresh_threads_share_their_workspace_file() {
    let dir = TempDir::new();
    let (writer, task) = spawn(&dir.0, 10_000);
    for i in 0..5_000 {
        let mut r = record("acme", &format!("fresh-{i}"), &format!("r{i}"));
        r.started_unix_ms = DAY0 + i * 1000;
        assert!(writer.submit(r));
    }
    task.shutdown().await;
    let files = files_under(&dir.0);
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(lines(&files[0]).len(), 5_000);
    assert_eq!(writer.dropped(), 0);
}

#[tokio::test]
async fn hourly_rotation_starts_a_file_per_hour() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        100,
        Retention {
            rotate: Rotation::Hour,
            ..retention()
        },
    );
    for (i, at) in [0, HOUR - 1, HOUR, 2 * HOUR + 5, DAY]
        .into_iter()
        .enumerate()
    {
        assert!(writer.submit(record_at("acme", &format!("r{i}"), DAY0 + at)));
    }
    task.shutdown().await;
    let names: Vec<_> = workspace_files(&dir.0, "acme")
        .unwrap()
        .iter()
        .map(|f| f.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "2025-01-31T00.jsonl",
            "2025-01-31T01.jsonl",
            "2025-01-31T02.jsonl",
            "2025-02-01T00.jsonl"
        ]
    );
    let ids = request_ids(&workspace_lines(&dir.0, "acme"));
    assert_eq!(ids, ["r0", "r1", "r2", "r3", "r4"]);
}

#[tokio::test]
async fn a_full_file_goes_on_in_the_next_segment() {
    let dir = TempDir::new();
    let line = serde_json::to_vec(&record_at("acme", "r00", DAY0))
        .unwrap()
        .len() as u64
        + 1;
    let max = 3 * line + line / 2;
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        100,
        Retention {
            max_file_bytes: max,
            ..retention()
        },
    );
    // One batch (nothing runs until shutdown): the store cuts it.
    for i in 0..10 {
        assert!(writer.submit(record_at("acme", &format!("r{i:02}"), DAY0)));
    }
    task.shutdown().await;
    let files = workspace_files(&dir.0, "acme").unwrap();
    let names: Vec<_> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "2025-01-31.jsonl",
            "2025-01-31.1.jsonl",
            "2025-01-31.2.jsonl",
            "2025-01-31.3.jsonl"
        ]
    );
    for f in &files {
        assert!(std::fs::metadata(f).unwrap().len() <= max, "{f:?}");
    }
    let expected: Vec<_> = (0..10).map(|i| format!("r{i:02}")).collect();
    assert_eq!(request_ids(&workspace_lines(&dir.0, "acme")), expected);
}

#[tokio::test]
async fn a_trace_longer_than_a_file_gets_one_of_its_own() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        100,
        Retention {
            max_file_bytes: 10,
            max_total_bytes: 1 << 20,
            ..retention()
        },
    );
    for i in 0..3 {
        assert!(writer.submit(record_at("acme", &format!("r{i}"), DAY0)));
    }
    task.shutdown().await;
    let files = workspace_files(&dir.0, "acme").unwrap();
    assert_eq!(files.len(), 3);
    assert!(files.iter().all(|f| lines(f).len() == 1));
}

#[tokio::test]
async fn the_oldest_files_go_past_the_total_bytes() {
    let dir = TempDir::new();
    let line = serde_json::to_vec(&record_at("acme", "r00", DAY0))
        .unwrap()
        .len() as u64
        + 1;
    let r = Retention {
        max_file_bytes: 2 * line,
        max_total_bytes: 5 * line,
        ..retention()
    };
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 100, r);
    // A day each, in order, with a write between them: ten files of one
    // line, of which the cap keeps the newest five.
    for i in 0..10 {
        assert!(writer.submit(record_at("acme", &format!("r{i:02}"), DAY0 + i * DAY)));
        tokio::task::yield_now().await;
    }
    task.shutdown().await;
    let ids = request_ids(&workspace_lines(&dir.0, "acme"));
    assert_eq!(ids, ["r05", "r06", "r07", "r08", "r09"]);
    let total: u64 = files_under(&dir.0)
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    assert!(total <= r.max_total_bytes, "{total}");
}

#[tokio::test]
async fn fresh_workspaces_are_bounded_by_max_files() {
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        10_000,
        Retention {
            max_files: 20,
            ..retention()
        },
    );
    for i in 0..500 {
        assert!(writer.submit(record_at(&format!("ws-{i}"), "r", DAY0)));
        if i % 50 == 0 {
            tokio::task::yield_now().await;
        }
    }
    task.shutdown().await;
    assert_eq!(files_under(&dir.0).len(), 20);
    // Emptied workspace directories go with their last file.
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), 20);
    // The newest stay.
    assert_eq!(workspace_lines(&dir.0, "ws-499").len(), 1);
    assert!(workspace_lines(&dir.0, "ws-0").is_empty());
}

#[tokio::test]
async fn files_found_at_start_count_against_the_caps() {
    let dir = TempDir::new();
    // An earlier layout's per-thread files, oldest first by mtime.
    let old = dir.0.join("acme");
    std::fs::create_dir_all(&old).unwrap();
    let base = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    for i in 0..5u64 {
        let path = old.join(format!("thread-{i}.jsonl"));
        std::fs::write(&path, b"{}\n").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(base + Duration::from_secs(i)).unwrap();
    }
    // Not a trace file: never counted, never removed.
    std::fs::write(old.join("notes.txt"), b"keep").unwrap();
    let (writer, task) = TraceWriter::spawn(
        dir.0.clone(),
        8,
        Retention {
            max_files: 3,
            // Files of 2023 against traces of 2025: the count is the cap
            // under test here, not the age.
            max_age: None,
            ..retention()
        },
    );
    assert!(writer.submit(record_at("acme", "new", DAY0)));
    task.shutdown().await;
    let mut left: Vec<_> = std::fs::read_dir(&old)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "2025-01-31.jsonl",
            "notes.txt",
            "thread-3.jsonl",
            "thread-4.jsonl"
        ]
    );
}

#[tokio::test]
async fn files_older_than_max_age_go_when_newer_traces_come() {
    let dir = TempDir::new();
    let r = Retention {
        rotate: Rotation::Hour,
        max_age: Some(Duration::from_secs(2 * 3_600)),
        ..retention()
    };
    // An hour's file each for hours 0..=5 of a day: with the newest trace
    // at hour 5, the files whose newest trace is before hour 3 go (files
    // are appended in the order of their first trace, so this holds
    // however the traces are batched).
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 100, r);
    for h in 0..=5 {
        assert!(writer.submit(record_at("acme", &format!("h{h}"), DAY0 + h * HOUR + 1)));
    }
    task.shutdown().await;
    let ids = request_ids(&workspace_lines(&dir.0, "acme"));
    assert_eq!(ids, ["h3", "h4", "h5"]);

    // Off: nothing goes for its age.
    let dir = TempDir::new();
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 100, Retention { max_age: None, ..r });
    for h in 0..=5 {
        assert!(writer.submit(record_at("acme", &format!("h{h}"), DAY0 + h * HOUR)));
    }
    task.shutdown().await;
    assert_eq!(request_ids(&workspace_lines(&dir.0, "acme")).len(), 6);
}

#[tokio::test]
async fn files_found_at_start_age_by_their_modification_time() {
    let dir = TempDir::new();
    let old = dir.0.join("acme");
    std::fs::create_dir_all(&old).unwrap();
    let at = |ms: u64| std::time::SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    for (name, ms) in [
        ("stale.jsonl", DAY0 - 3 * DAY),
        ("fresh.jsonl", DAY0 - HOUR),
    ] {
        let path = old.join(name);
        std::fs::write(&path, b"{}\n").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(at(ms)).unwrap();
    }
    let r = Retention {
        max_age: Some(Duration::from_secs(24 * 3_600)),
        ..retention()
    };
    let (writer, task) = TraceWriter::spawn(dir.0.clone(), 8, r);
    assert!(writer.submit(record_at("acme", "new", DAY0)));
    task.shutdown().await;
    let mut left: Vec<_> = std::fs::read_dir(&old)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["2025-01-31.jsonl", "fresh.jsonl"]);
}
