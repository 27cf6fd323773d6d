//! What `sluice serve` writes on stderr: an idle gateway at `SLUICE_LOG=debug`
//! says what it does, not every statement its job poller runs; and how it
//! ends on a SIGTERM that comes as soon as it listens.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Stack, TempDir};

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

/// A gateway before the sim's OpenAI side, for the tenant `acme` with
/// the key `key-acme`.
fn access_config(sim: &str, data: &std::path::Path) -> String {
    format!(
        "data_dir = {:?}\n[trace]\nenabled = false\n[jobs]\nenabled = false\n\
         [[tenants]]\nname = \"acme\"\napi_key_env = \"ACME_KEY\"\n{}",
        data.display().to_string(),
        common::sim_providers(sim, &["openai"])
    )
}

/// Calls the gateway at `url` as `acme`: a chat, a streamed chat, a
/// route that does not exist and one without a key; returns the request
/// id it gave the first chat.
async fn four_calls(url: &str) -> String {
    let http = common::client();
    let chat = format!("{url}/v1/chat/completions");
    let whole = http
        .post(&chat)
        .bearer_auth("key-acme")
        .header("x-request-id", "access-whole-1")
        .json(&common::chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap();
    assert_eq!(whole.status(), 200);
    let streamed = http
        .post(&chat)
        .bearer_auth("key-acme")
        .json(&common::chat("openai/gpt-4o-mini", true))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), 200);
    // The stream's line is written at its end: read it to the end.
    streamed.bytes().await.unwrap();
    let missing = http
        .get(format!("{url}/v1/nothing?key=secret"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let anonymous = http
        .post(&chat)
        .json(&common::chat("openai/gpt-4o-mini", false))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    "access-whole-1".to_owned()
}

/// The access lines among `log`, once there are `n`.
async fn access_lines(stack: &Stack, n: usize) -> Vec<String> {
    common::until("the access lines", || {
        stack
            .gateway
            .log()
            .iter()
            .filter(|l| l.contains("sluice::access"))
            .count()
            >= n
    })
    .await;
    stack
        .gateway
        .log()
        .into_iter()
        .filter(|l| l.contains("sluice::access"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_has_one_access_line_with_its_tenant_model_tokens_and_id() {
    let env = [("ACME_KEY", "key-acme"), ("SLUICE_LOG", "info")];
    let stack = Stack::start("logs-access", &env, access_config);
    let id = four_calls(&stack.gateway.url).await;
    let lines = access_lines(&stack, 4).await;
    assert_eq!(lines.len(), 4, "one line a request:\n{}", lines.join("\n"));
    let whole = lines
        .iter()
        .find(|l| l.contains(&id))
        .expect("the chat's line");
    for field in [
        "method=\"POST\"",
        "path=/v1/chat/completions",
        "status=200",
        "tenant=\"acme\"",
        "model=\"openai/gpt-4o-mini\"",
        "upstream=\"openai\"",
    ] {
        let field = field.replace('"', "");
        assert!(
            whole.replace('"', "").contains(&field),
            "{field} missing: {whole}"
        );
    }
    assert!(!whole.contains("prompt_tokens=0"), "no tokens: {whole}");
    let streamed = lines
        .iter()
        .find(|l| {
            !l.contains(&id) && l.contains("/v1/chat/completions") && l.contains("status=200")
        })
        .expect("the stream's line");
    assert!(!streamed.contains("completion_tokens=0"), "{streamed}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("status=404") && l.contains("/v1/nothing"))
    );
    assert!(
        lines.iter().all(|l| !l.contains("secret")),
        "a query went to the log"
    );
    assert!(lines.iter().any(|l| l.contains("status=401")));
    assert!(
        lines.iter().all(|l| !l.contains("key-acme")),
        "a key went to the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_json_format_each_access_line_is_one_json_object() {
    let env = [
        ("ACME_KEY", "key-acme"),
        ("SLUICE_LOG", "info"),
        ("SLUICE_LOG_FORMAT", "json"),
    ];
    let stack = Stack::start("logs-access-json", &env, access_config);
    let id = four_calls(&stack.gateway.url).await;
    let lines = access_lines(&stack, 4).await;
    let objects: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let whole = objects
        .iter()
        .find(|o| o["request_id"] == id.as_str())
        .expect("the chat's line");
    assert_eq!(whole["target"], "sluice::access");
    assert_eq!(whole["status"], 200);
    assert_eq!(whole["tenant"], "acme");
    assert!(whole["prompt_tokens"].as_u64().unwrap() > 0, "{whole}");
}
