//! What `sluice serve` writes on stderr: an idle gateway at `SLUICE_LOG=debug`
//! says what it does, not every statement its job poller runs; and how it
//! ends on a SIGTERM that comes as soon as it listens.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TempDir;

/// Runs `sluice serve` idle with `SLUICE_LOG=level` until it has listened
/// and polled its job queues a while (its "listening on" line, then
/// a second more), and returns what it wrote.
fn idle_log(level: &str, dir: &TempDir) -> String {
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!("data_dir = {:?}\n", dir.join("data").display().to_string()),
    )
    .unwrap();
    let log = dir.join(&format!("{level}.log"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("SLUICE_LOG", level)
        .env_remove("SLUICE_CONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("sluice starts");
    let started = Instant::now();
    // The job poller runs every few milliseconds while idle: a second
    // after listening it has run many times.
    let mut listened = None;
    while started.elapsed() < Duration::from_secs(60) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if listened.is_none() && text.contains("listening on") {
            listened = Some(Instant::now());
        }
        if listened.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(listened.is_some(), "sluice serve did not start");
    std::fs::read_to_string(&log).unwrap()
}

#[test]
fn an_idle_gateway_at_debug_does_not_log_its_pollers_statements() {
    let dir = TempDir::new("logs-idle");
    let debug = idle_log("debug", &dir);
    let statements = debug.lines().filter(|l| l.contains("sqlx::query")).count();
    assert_eq!(statements, 0, "statements logged at debug:\n{debug}");
    // At trace they are there: the poller did run.
    let trace = idle_log("trace", &dir);
    assert!(
        trace.lines().any(|l| l.contains("sqlx::query")),
        "no statement at trace either:\n{}",
        trace.lines().take(40).collect::<Vec<_>>().join("\n")
    );
}

/// A SIGTERM as soon as `sluice serve` says where it listens drains and
/// exits 0: the signal handler is installed before that line.
#[test]
fn a_sigterm_right_after_listening_drains_and_exits_cleanly() {
    let dir = TempDir::new("logs-early-term");
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!("data_dir = {:?}\n", dir.join("data").display().to_string()),
    )
    .unwrap();
    for round in 0..3 {
        let log = dir.join(&format!("term-{round}.log"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env_remove("SLUICE_CONFIG")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("sluice starts");
        let started = Instant::now();
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("listening on")
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "sluice serve did not start"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let killed = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        let status = child.wait().expect("sluice exits");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            status.success(),
            "round {round}: {status:?} (killed by the signal, not drained)\n{text}"
        );
        assert!(text.contains("sluice: stopped"), "round {round}:\n{text}");
    }
}
