//! The disk fills under the SQLite job store and the trace directory (a
//! small tmpfs; the test needs to be allowed to mount one, as root in CI,
//! and says so and passes otherwise): enqueues are answered 201 or 503,
//! never a cut connection; model calls are still served (their traces are
//! counted as failed writes); once space returns, enqueues are stored
//! again, every acknowledged job completes and traces are written again.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_sim::SimConfig;

use crate::procs::{self, TempDir};
use crate::{chat, client, sim, write_config};

/// A tmpfs mounted on a directory, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fills the filesystem of `dir` with one file; returns its path.
fn fill(dir: &std::path::Path) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("the filler");
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_a_503_and_the_store_recovers_when_space_returns() {
    let dir = TempDir::new("diskfull");
    let data = dir.join("data");
    let Some(_mount) = Tmpfs::mount(&data, "4m") else {
        eprintln!("note: cannot mount a tmpfs here (not root?); skipping the disk-full test");
        return;
    };
    let sim = sim(SimConfig::unlimited()).await;
    let (cfg, url) = write_config(&dir.0, "sluice.toml", &sim.url(), "");
    let serve = procs::serve(&cfg);
    let http = client();
    let enqueue = |n: usize| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let res = http
                .post(format!("{url}/v1/jobs"))
                .json(&json!({"queue": "default", "kind": "http",
                    "payload": {"api": "slack", "method": "POST", "path": format!("/full/{n}")}}))
                .send()
                .await
                .expect("an answer, not a cut");
            let status = res.status().as_u16();
            let v: Value = res.json().await.expect("JSON");
            (status, v)
        }
    };
    let mut acked = Vec::new();
    for n in 0..10 {
        let (status, v) = enqueue(n).await;
        assert_eq!(status, 201, "{v}");
        acked.push(v["id"].as_i64().unwrap());
    }
    let filler = fill(&data);
    let mut full = std::collections::BTreeMap::new();
    for n in 10..30 {
        let (status, v) = enqueue(n).await;
        match status {
            201 => acked.push(v["id"].as_i64().unwrap()),
            503 => assert_eq!(v["error"]["code"], "unavailable", "{v}"),
            _ => panic!("{status} {v}"),
        }
        *full.entry(status).or_insert(0) += 1;
    }
    let chat_full = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(chat_full, 200, "model calls do not need the disk");

    std::fs::remove_file(&filler).unwrap();
    let mut after = 0;
    for n in 30..40 {
        let (status, v) = enqueue(n).await;
        assert_eq!(status, 201, "space is back: {v}");
        acked.push(v["id"].as_i64().unwrap());
        after += 1;
    }
    crate::until_completed(&http, &url, acked.iter().copied()).await;
    // The trace writer writes again: a model call's trace reaches the
    // disk (traces are batched, hence the wait).
    let traced_while_full = crate::sigterm::count_lines(&data.join("traces"));
    let res = http
        .post(format!("{url}/v1/chat/completions"))
        .json(&chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let end = Instant::now() + procs::PATIENCE;
    while crate::sigterm::count_lines(&data.join("traces")) <= traced_while_full {
        assert!(
            Instant::now() < end,
            "no trace written after space returned"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "figure disk full: while full, enqueues {full:?} (201 where SQLite still had room), a model call 200 \
         ({traced_while_full} traces on disk); after, {after}/10 stored, traces written again; all {} acknowledged jobs completed",
        acked.len()
    );
    drop(serve);
    sim.shutdown().await;
}
