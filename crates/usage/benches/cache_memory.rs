//! Memory per cached byte of the in-process response cache: the growth
//! of the process's resident set while the cache fills, divided by the
//! answer bytes it holds, for several answer sizes (each size in a fresh
//! child process, so freed memory of one does not hide the next's); and
//! the resident set after writing twice the byte bound, which the bound
//! must hold. Memory, not time: the figure does not depend on the load.
//!
//! `cargo bench -p sluice-usage --bench cache_memory`

use std::process::Command;

use bytes::Bytes;
use sluice_usage::Endpoint;
use sluice_usage::cache::{Answer, CacheConfig, CacheKey, NewEntry, ResponseCache, Scope};

/// Resident set size of this process, in bytes (Linux).
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (Linux)");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm's resident pages");
    pages * 4096
}

/// A chat answer of about `size` bytes, distinct for each `i`.
fn answer(i: usize, size: usize) -> Answer {
    let head = format!(
        r#"{{"id":"chatcmpl-{i}","object":"chat.completion","model":"gpt-4o-mini","choices":[{{"index":0,"message":{{"role":"assistant","content":""#
    );
    let tail = r#""},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52}}"#;
    let fill = size.saturating_sub(head.len() + tail.len());
    let mut body = String::with_capacity(size);
    body.push_str(&head);
    body.extend(std::iter::repeat_n('x', fill));
    body.push_str(tail);
    Answer::json(Bytes::from(body))
}

/// Stores `n` answers of `size` bytes; returns the answer bytes the cache
/// holds at the end.
fn fill(cache: &ResponseCache, n: usize, size: usize) -> (u64, u64) {
    let scope = Scope::Tenant("acme".into());
    for i in 0..n {
        let body = serde_json::json!({"model": "gpt-4o-mini", "temperature": 0, "messages": [{"role": "user", "content": i.to_string()}]});
        let key = CacheKey::for_request(&scope, "openai", Endpoint::Chat, &body);
        let new = NewEntry {
            scope: scope.clone(),
            model: "openai/gpt-4o-mini".into(),
            answer: answer(i, size),
            usage: None,
            ttl: None,
        };
        let entry = cache.entry(new).expect("within max_entry_bytes");
        cache.insert(key, entry);
    }
    let stats = cache.stats();
    (stats.entries, stats.entries * size as u64)
}

const MIB: f64 = (1u64 << 20) as f64;

/// One size in this process: fills a cache with 64 MiB of answers of
/// `size` bytes and prints a row.
fn measure(size: usize) {
    let before = rss();
    let cache = ResponseCache::new(CacheConfig {
        max_bytes: 1 << 30,
        ..CacheConfig::default()
    });
    let (entries, stored) = fill(&cache, (64usize << 20) / size, size);
    let grown = rss().saturating_sub(before);
    println!(
        "{:>12} {:>9} {:>12.1} {:>12.1} {:>15.2} {:>17.0}",
        size,
        entries,
        stored as f64 / MIB,
        grown as f64 / MIB,
        grown as f64 / stored as f64,
        (grown as f64 - stored as f64) / entries as f64
    );
}

/// The bound: twice `max_bytes` of answers written, what stays.
fn bounded() {
    let max_bytes = 32u64 << 20;
    let before = rss();
    let cache = ResponseCache::new(CacheConfig {
        max_bytes,
        ..CacheConfig::default()
    });
    let size = 4_096;
    let (entries, stored) = fill(&cache, (2 * max_bytes as usize) / size, size);
    let grown = rss().saturating_sub(before);
    println!(
        "\nmax_bytes {} MiB, {} MiB of {size}-byte answers written: {entries} entries hold {:.1} MiB of answers; resident set grew {:.1} MiB",
        max_bytes >> 20,
        (2 * max_bytes) >> 20,
        stored as f64 / MIB,
        grown as f64 / MIB
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--size") => return measure(args[2].parse().expect("a size in bytes")),
        Some("--bound") => return bounded(),
        // `cargo bench` passes `--bench`; anything else runs everything.
        _ => {}
    }
    println!(
        "response cache in memory: resident set grown per answer byte held\n\n{:>12} {:>9} {:>12} {:>12} {:>15} {:>17}",
        "answer bytes",
        "entries",
        "answers MiB",
        "grown MiB",
        "grown / answer",
        "bytes over / entry"
    );
    let me = std::env::current_exe().expect("the bench's own path");
    let run = |args: &[&str]| {
        let out = Command::new(&me)
            .args(args)
            .output()
            .expect("the bench in a child");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    for size in ["256", "1024", "4096", "32768"] {
        run(&["--size", size]);
    }
    run(&["--bound"]);
}
