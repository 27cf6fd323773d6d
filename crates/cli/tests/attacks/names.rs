//! High 2 and 5 of issue 33: model names of megabytes became limiter
//! resources, lanes, dashboard entries and ledger records (two 8 MB
//! requests: RSS 77 → 490 MB); a Gemini model name was pasted into the
//! URL (`gem/cheap/../pro` priced as cheap, sent to `models/pro`).

use serde_json::{Value, json};

use crate::{ACME, Target, chat, refusal};

/// Resident memory of `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A random model name of `len` letters after `openai/`.
fn long_name(len: usize) -> String {
    let mut s = String::with_capacity(len + 7);
    s.push_str("openai/");
    for _ in 0..len {
        s.push(fastrand::alphanumeric());
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_long_model_names_is_refused_and_memory_stays_flat() {
    let t = Target::start("attack-names", "");
    // Warm: what ordinary calls leave.
    for _ in 0..5 {
        let res = t
            .post("/v1/chat/completions", Some(ACME), &chat(crate::MODEL))
            .await;
        assert_eq!(res.status(), 200);
    }
    let before = rss(t.gateway.pid());
    let (rounds, len) = (20, 1 << 20);
    for i in 0..rounds {
        let name = long_name(len);
        let (path, body): (&str, Value) = match i % 3 {
            0 => ("/v1/chat/completions", chat(&name)),
            1 => ("/v1/embeddings", json!({"model": name, "input": "x"})),
            _ => ("/v1/limits/acquire", json!({ "model": name })),
        };
        let (status, e) = refusal(t.post(path, Some(ACME), &body).await).await;
        assert_eq!(status, 400, "{path}: {e}");
        assert_eq!(e["param"], "model", "{path}: {e}");
    }
    let after = rss(t.gateway.pid());
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "names: RSS {:.1} MB before, {:.1} MB after {rounds} requests with {} MiB model names \
         (pid {})",
        mb(before),
        mb(after),
        len >> 20,
        t.gateway.pid()
    );
    // Before the fix each byte of name kept ~22 bytes: 20 MiB of names
    // were ~440 MB kept. Now nothing is kept but the allocator's caches.
    assert!(
        after < before + (64 << 20),
        "RSS grew from {:.1} to {:.1} MB",
        mb(before),
        mb(after)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_are_not_one_segment_or_not_visible_ascii_are_refused() {
    let t = Target::start("attack-segments", "");
    for model in [
        "google/gemini-2.0-flash/../gemini-2.5-pro",
        "google/../../v1/models/x",
        "google/a/b",
        "openai/cheap/../gpt-4o",
        "openai/gpt 4o",
        "openai/gpt-4o\u{1b}[2J",
    ] {
        let (status, e) = refusal(
            t.post("/v1/chat/completions", Some(ACME), &chat(model))
                .await,
        )
        .await;
        assert_eq!(
            (status, e["param"].as_str()),
            (400, Some("model")),
            "{model:?}: {e}"
        );
    }
    // Nothing reached the simulator's Gemini.
    let stats = crate::common::sim_stats(&t.http, &t.sim.url).await;
    assert!(
        !stats.to_string().contains("gemini-2.5-pro"),
        "a call reached the upstream: {stats}"
    );
    // A plain Gemini model still works, through the URL built of segments.
    let res = t
        .post(
            "/v1/chat/completions",
            Some(ACME),
            &chat("google/gemini-2.0-flash"),
        )
        .await;
    assert_eq!(res.status(), 200, "{:?}", res.text().await);
}
