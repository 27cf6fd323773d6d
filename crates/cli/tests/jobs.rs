//! `sluice jobs` against a running `sluice serve` process: list, show,
//! retry, cancel, purge, pause, resume and queues, in tables and JSON, and
//! clear failures for errors and an unreachable gateway.

mod common;

use std::process::{Command, Output};

use common::Serve;
use serde_json::{Value, json};

const ADMIN: &str = "s3cret";

/// A `sluice serve` with an admin token, no workers and its data in a
/// temporary directory.
struct Fixture {
    serve: Serve,
}

impl Fixture {
    fn start() -> Fixture {
        Fixture {
            serve: Serve::with_admin("cli-jobs", ADMIN),
        }
    }

    /// Runs `sluice jobs --target URL ARGS`.
    fn jobs(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["jobs", "--target", &self.serve.url])
            .args(args)
            .env_remove("SLUICE_ADMIN_TOKEN")
            .env_remove("SLUICE_API_KEY")
            .env_remove("SLUICE_WORKSPACE")
            .env_remove("SLUICE_TARGET")
            .output()
            .expect("sluice jobs runs")
    }

    /// Runs it, expects success, returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        common::succeeded(&format!("sluice jobs {args:?}"), self.jobs(args))
    }

    /// Runs it with `--json`, expects success, parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.ok(&all)).expect("JSON on stdout")
    }

    /// Runs it, expects exit 1, returns stderr.
    fn fails(&self, args: &[&str]) -> String {
        let out = self.jobs(args);
        assert_eq!(out.status.code(), Some(1), "sluice jobs {args:?}: {out:?}");
        String::from_utf8(out.stderr).unwrap()
    }

    /// Enqueues a job for `workspace` through the HTTP API.
    fn enqueue(&self, workspace: &str) -> i64 {
        let body = json!({
            "queue": "default",
            "kind": "http",
            "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": "hi"}}
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // reqwest is built with `rustls-no-provider`; installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        rt.block_on(async {
            let res = reqwest::Client::new()
                .post(format!("{}/v1/jobs", self.serve.url))
                .header("x-sluice-workspace", workspace)
                .json(&body)
                .send()
                .await
                .expect("the gateway answers");
            assert_eq!(res.status(), 201);
            let job: Value = res.json().await.unwrap();
            job["id"].as_i64().unwrap()
        })
    }
}

#[test]
fn jobs_commands_against_a_running_server() {
    let serve = Fixture::start();
    let ids: Vec<i64> = (0..3).map(|_| serve.enqueue("acme")).collect();
    serve.enqueue("globex");

    // list: the workspace's jobs only, as a table and as JSON.
    let table = serve.ok(&["--workspace", "acme", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("ID"), "{table}");
    assert_eq!(lines.len(), 4, "a header and three jobs:\n{table}");
    assert!(lines[1].starts_with(&ids[0].to_string()), "{table}");
    assert!(
        lines[1].contains("available") && lines[1].contains("http"),
        "{table}"
    );
    let page = serve.json(&["--workspace", "acme", "list", "--limit", "2"]);
    assert_eq!(page["jobs"].as_array().unwrap().len(), 2);
    let cursor = page["next_cursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let page = serve.json(&[
        "--workspace",
        "acme",
        "list",
        "--limit",
        "2",
        "--cursor",
        &cursor,
    ]);
    assert_eq!(page["jobs"][0]["id"], ids[2]);

    // show
    let shown = serve.ok(&["--workspace", "acme", "show", &ids[0].to_string()]);
    assert!(
        shown.contains("available") && shown.contains("chat.postMessage"),
        "{shown}"
    );
    let err = serve.fails(&["--workspace", "globex", "show", &ids[0].to_string()]);
    assert!(err.contains("404") && err.contains("not found"), "{err}");

    // cancel, then retry: a cancelled job is not dead, and the server says so.
    let cancelled = serve.json(&["--workspace", "acme", "cancel", &ids[1].to_string()]);
    assert_eq!(cancelled["state"], "cancelled");
    let err = serve.fails(&["--workspace", "acme", "retry", &ids[1].to_string()]);
    assert!(err.contains("409") && err.contains("cancelled"), "{err}");

    // Queue-wide commands take the admin token.
    let err = serve.fails(&["pause", "default"]);
    assert!(err.contains("--admin-token"), "{err}");
    let out = serve.ok(&["--admin-token", ADMIN, "pause", "default"]);
    assert_eq!(out, "default: paused\n");
    let queues = serve.json(&["--admin-token", ADMIN, "queues"]);
    let default = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "default")
        .unwrap()
        .clone();
    assert_eq!(default["paused"], true);
    assert_eq!(default["counts"]["available"], 3);
    assert_eq!(default["counts"]["cancelled"], 1);
    let table = serve.ok(&["--admin-token", ADMIN, "queues"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("default") && l.contains("paused")),
        "{table}"
    );
    assert_eq!(
        serve.ok(&["--admin-token", ADMIN, "resume", "default"]),
        "default: running\n"
    );
    let out = serve.ok(&["--admin-token", ADMIN, "retry", "--dead", "default"]);
    assert_eq!(out, "default: 0 dead jobs made available again\n");
    let out = serve.ok(&["--admin-token", ADMIN, "purge", "default"]);
    assert_eq!(out, "default: 0 dead jobs deleted\n");
    let err = serve.fails(&["--admin-token", ADMIN, "pause", "nowhere"]);
    assert!(err.contains("unknown queue"), "{err}");

    // schedules: create, list, show, delete; another workspace sees none.
    let job = r#"{"queue": "default", "kind": "http", "payload": {"api": "slack", "path": "/api/chat.postMessage"}}"#;
    let created = serve.json(&[
        "--workspace",
        "acme",
        "schedules",
        "create",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--tz",
        "Europe/Paris",
        "--job",
        job,
    ]);
    assert_eq!(
        (created["name"].as_str(), created["runs"].as_u64()),
        (Some("nightly"), Some(0))
    );
    let table = serve.ok(&["--workspace", "acme", "schedules", "list"]);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("nightly") && l.contains("cron 0 3 * * * (Europe/Paris)")),
        "{table}"
    );
    let shown = serve.ok(&["--workspace", "acme", "schedules", "show", "nightly"]);
    assert!(shown.contains("default"), "{shown}");
    let err = serve.fails(&["--workspace", "globex", "schedules", "show", "nightly"]);
    assert!(err.contains("not found"), "{err}");
    let err = serve.fails(&[
        "--workspace",
        "acme",
        "schedules",
        "create",
        "bad",
        "--cron",
        "61 * * * *",
        "--job",
        job,
    ]);
    assert!(err.contains("cron"), "{err}");
    assert_eq!(
        serve.ok(&["--workspace", "acme", "schedules", "delete", "nightly"]),
        "nightly: deleted\n"
    );
}

#[test]
fn an_unreachable_gateway_is_a_clear_failure() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "jobs",
            "--target",
            &format!("http://127.0.0.1:{port}"),
            "list",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("cannot reach the gateway"), "{err}");

    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["jobs", "--target", "ftp://example", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
