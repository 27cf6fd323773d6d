//! A new user's first hour, scripted (issue 38): `sluice sim` and
//! `sluice serve` as processes, configured as real providers would be —
//! provider keys from environment variables, the built-in `anthropic`
//! overridden by name with only its `base_url` — walked through each
//! mistake of the issue in the order a user meets it, asserting that
//! every message names its fix:
//! 1. `sluice check-config`: the override keeps the built-in's format and
//!    key variable, and each value says where it came from;
//! 2. a provider whose key variable is unset is named at start-up,
//!    answers 503 `provider_not_configured` naming the variable, and
//!    `/readyz` lists it;
//! 3. each call is one access-log line on stderr and a row of the request
//!    log (`GET /v1/requests`, `sluice requests`);
//! 4. a model without a price: refused under a money budget with how to
//!    price it, marked `unpriced` without one;
//! 5. the CLI: `sluice jobs list` with the admin token, `sluice usage
//!    --api-key` scoped to its tenant, `--json`, `keys delete` and
//!    `tenants delete`;
//! 6. `/health` and `/` answer.
//!
//! Each step is asserted in the other suites too (check-config in the
//! gateway's config tests, credentials.rs, requests.rs, keys.rs, jobs.rs,
//! the gateway's ops tests); this one ties them into one walk a reviewer
//! can run: `cargo test -p sluice --test first_hour`.

mod common;

use std::process::{Command, Output};

use common::{Stack, read_until, requests_cli};
use serde_json::{Value, json};

const ADMIN: &str = "first-hour-admin";

/// What the user exports: a tenant's key, the Anthropic key (the
/// OpenAI one is forgotten: empty), and one setting by variable.
const ENV: &[(&str, &str)] = &[
    ("ACME_KEY", "key-acme"),
    ("ANTHROPIC_API_KEY", "sk-ant-first-hour"),
    ("OPENAI_API_KEY", ""),
    ("SLUICE_RETRY__MAX_ATTEMPTS", "4"),
    ("SLUICE_LOG", "info"),
];

/// The user's `sluice.toml`: the built-in `anthropic` pointed at the sim
/// by name and nothing else; `openai` left as built in (its key unset,
/// so it must never be called); one tenant whose key is in `ACME_KEY`.
fn config(sim: &str, data: &std::path::Path) -> String {
    format!(
        "data_dir = {:?}\nadmin_token = {ADMIN:?}\n[trace]\nenabled = false\n[jobs]\nworkers = false\n\
         [[providers]]\nname = \"anthropic\"\nbase_url = \"{sim}/anthropic/v1\"\n\
         [[apis]]\nname = \"slack\"\nbase_url = \"{sim}/slack\"\nrequests_per_second = 10.0\nburst = 10\n\
         [[tenants]]\nname = \"acme\"\napi_key_env = \"ACME_KEY\"\n",
        data.display().to_string()
    )
}

/// `sluice ARGS` with [`ENV`] (and no other `SLUICE_` setting of the
/// test's own environment) plus `env`.
fn sluice(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env_remove("SLUICE_API_KEY")
        .env_remove("SLUICE_TARGET")
        .env_remove("SLUICE_CONFIG")
        .envs(ENV.iter().copied())
        .envs(env.iter().copied())
        .output()
        .expect("the sluice binary runs")
}

/// [`sluice`], which must succeed: its stdout.
fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    common::succeeded(&format!("sluice {args:?}"), sluice(args, env))
}

/// A chat call of `model` as `key` with the request id `id`: its status
/// and JSON body.
async fn call(http: &reqwest::Client, url: &str, key: &str, model: &str, id: &str) -> (u16, Value) {
    let mut body = common::chat(model, false);
    body["max_tokens"] = json!(16);
    let res = http
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key)
        .header("x-request-id", id)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{model}: {e}"));
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The entry of `[[providers]]` named `name` in check-config's output:
/// its lines up to the next header.
fn provider_block<'a>(shown: &'a str, name: &str) -> Vec<&'a str> {
    let lines: Vec<&str> = shown.lines().collect();
    let named = format!("name = \"{name}\"");
    let at = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with(&named))
        .map(|(i, _)| i)
        .find(|&i| lines[..i].iter().rev().find(|l| l.starts_with('[')) == Some(&"[[providers]]"))
        .unwrap_or_else(|| panic!("no provider {name}:\n{shown}"));
    let start = lines[..at]
        .iter()
        .rposition(|l| l.starts_with('['))
        .unwrap();
    let end = lines[at..]
        .iter()
        .position(|l| l.starts_with('['))
        .map_or(lines.len(), |n| at + n);
    lines[start..end].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_hour_of_a_new_user() {
    let stack = Stack::start("cli-first-hour", ENV, config);
    let url = stack.gateway.url.clone();
    let path = stack.dir.join("sluice.toml");
    let http = common::client();

    // 1. The override by name keeps the built-in's format and key
    // variable; each value says where it came from.
    let shown = ok(&["check-config", path.to_str().unwrap()], &[]);
    let anthropic = provider_block(&shown, "anthropic");
    let line = |start: &str| -> &str {
        anthropic
            .iter()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start} in {anthropic:#?}"))
    };
    let file = format!("# file {}", path.display());
    assert!(
        line("base_url = ").contains("/anthropic/v1\""),
        "{anthropic:#?}"
    );
    assert!(line("base_url = ").ends_with(&file), "{anthropic:#?}");
    assert!(
        line("format = \"anthropic\"").ends_with("# default"),
        "{anthropic:#?}"
    );
    assert!(
        line("api_key_env = \"ANTHROPIC_API_KEY\"").ends_with("# default"),
        "{anthropic:#?}"
    );
    let attempts = shown
        .lines()
        .find(|l| l.starts_with("max_attempts = 4"))
        .unwrap_or_else(|| panic!("SLUICE_RETRY__MAX_ATTEMPTS not applied:\n{shown}"));
    assert!(
        attempts.ends_with("# env SLUICE_RETRY__MAX_ATTEMPTS"),
        "{attempts}"
    );
    assert!(
        !shown.contains("sk-ant-first-hour"),
        "a key's value is shown:\n{shown}"
    );

    // 2. The forgotten OpenAI key: named at start-up, in /readyz, and in
    // the answer to a call, which never goes out without it.
    let started = stack.gateway.log().join("\n");
    assert!(
        started.contains("providers without an API key") && started.contains("OPENAI_API_KEY"),
        "{started}"
    );
    let ready = common::readyz(&http, &url).await;
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["providers"]["openai"], "not_configured", "{ready}");
    assert_eq!(ready["providers"]["anthropic"], "ready", "{ready}");
    let (status, body) = call(&http, &url, "key-acme", "openai/gpt-4o-mini", "fh-no-key").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "provider_not_configured", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");

    // 3. A call through the override is answered, and every call is one
    // access line and one row of the request log.
    let (status, body) = call(
        &http,
        &url,
        "key-acme",
        "anthropic/claude-3-5-haiku",
        "fh-ok",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for (id, status, model) in [
        ("fh-no-key", "503", "openai/gpt-4o-mini"),
        ("fh-ok", "200", "anthropic/claude-3-5-haiku"),
    ] {
        let mine = |l: &&String| l.contains(id) && l.contains("sluice::access");
        common::until(&format!("no access line for {id}"), || {
            stack.gateway.log().iter().any(|l| mine(&l))
        })
        .await;
        let log = stack.gateway.log();
        let lines: Vec<_> = log.iter().filter(mine).collect();
        assert_eq!(lines.len(), 1, "one line per request: {lines:#?}");
        let l = lines[0];
        for part in ["POST", "/v1/chat/completions", "acme", model, status] {
            assert!(l.contains(part), "{part} missing from {l}");
        }
    }
    let own = read_until(&http, &format!("{url}/v1/requests"), "key-acme", |b| {
        b["requests"].as_array().is_some_and(|r| r.len() >= 2)
    })
    .await;
    let statuses: Vec<(String, u64)> = own["requests"]
        .as_array()
        .unwrap_or_else(|| panic!("{own}"))
        .iter()
        .map(|r| {
            (
                r["request_id"].as_str().unwrap_or_default().to_owned(),
                r["status"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    for want in [("fh-no-key", 503), ("fh-ok", 200)] {
        assert!(
            statuses.contains(&(want.0.to_owned(), want.1)),
            "{want:?} missing: {own}"
        );
    }
    let listed = requests_cli(&url, &["--api-key", "key-acme", "--status", "503"]);
    assert_eq!(listed["requests"][0]["request_id"], "fh-no-key", "{listed}");

    // 4. A model without a price: under a money budget, refused with how
    // to price it; without one, served and marked unpriced.
    let admin = ["--target", url.as_str(), "--admin-token", ADMIN];
    let tenants_create = [
        &["tenants", "create", "globex", "--budget"][..],
        &["name=monthly,money=10,period=month"],
        &admin,
        &["--json"],
    ]
    .concat();
    ok(&tenants_create, &[]);
    let issued: Value = serde_json::from_str(&ok(
        &[
            &["keys", "issue", "--tenant", "globex"][..],
            &admin,
            &["--json"],
        ]
        .concat(),
        &[],
    ))
    .expect("JSON");
    let (globex_key, globex_id) = (
        issued["key"].as_str().unwrap(),
        issued["id"].as_str().unwrap(),
    );
    let unpriced = "anthropic/sluice-first-hour-unpriced";
    let (status, body) = call(&http, &url, globex_key, unpriced, "fh-budget").await;
    assert_eq!(status, 403, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("has no price")
            && message.contains("[prices.")
            && message.contains("sluice prices"),
        "{message}"
    );
    let (status, body) = call(&http, &url, "key-acme", unpriced, "fh-unpriced").await;
    assert_eq!(status, 200, "{body}");
    let own = read_until(&http, &format!("{url}/v1/requests"), "key-acme", |b| {
        b["requests"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["request_id"] == "fh-unpriced"))
    })
    .await;
    let row = own["requests"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["request_id"] == "fh-unpriced"))
        .unwrap_or_else(|| panic!("fh-unpriced missing: {own}"));
    assert_eq!(row["unpriced"], true, "{row}");

    // 5. The CLI: the admin token lists jobs; a tenant's key scopes
    // usage to its tenant even with the admin token exported; keys and
    // tenants are deleted.
    let job = json!({"queue": "default", "kind": "http", "payload": {"api": "slack", "method": "POST", "path": "/api/chat.postMessage", "body": {"text": "hi"}}});
    let res = http
        .post(format!("{url}/v1/jobs"))
        .bearer_auth("key-acme")
        .json(&job)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201, "{}", res.text().await.unwrap());
    let jobs = ok(&[&["jobs"][..], &admin, &["list", "--json"]].concat(), &[]);
    let jobs: Value = serde_json::from_str(&jobs).unwrap_or_else(|e| panic!("{e}: {jobs}"));
    assert_eq!(jobs["jobs"][0]["kind"], "http", "{jobs}");
    let usage: Value = serde_json::from_str(&ok(
        &[
            "usage",
            "--target",
            &url,
            "--api-key",
            "key-acme",
            "--group-by",
            "tenant,model",
            "--json",
        ],
        &[("SLUICE_ADMIN_TOKEN", ADMIN)],
    ))
    .expect("JSON");
    let rows = usage["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{usage}"));
    assert!(!rows.is_empty(), "{usage}");
    assert!(
        rows.iter().all(|r| r["tenant"] == "acme"),
        "another tenant's usage: {usage}"
    );
    let marked = rows
        .iter()
        .find(|r| r["model"] == unpriced)
        .unwrap_or_else(|| panic!("{unpriced} missing: {usage}"));
    assert_eq!(marked["unpriced"], 1, "{usage}");
    let table = ok(&["usage", "--target", &url, "--api-key", "key-acme"], &[]);
    assert!(
        table.contains("without a price (`sluice prices`)"),
        "{table}"
    );
    let out = ok(&[&["keys", "delete", globex_id][..], &admin].concat(), &[]);
    assert!(out.contains(globex_id), "{out}");
    let (status, _) = call(
        &http,
        &url,
        globex_key,
        "anthropic/claude-3-5-haiku",
        "fh-deleted",
    )
    .await;
    assert_eq!(status, 401, "a deleted key is refused");
    let gone: Value = serde_json::from_str(&ok(
        &[&["tenants", "delete", "globex"][..], &admin, &["--json"]].concat(),
        &[],
    ))
    .expect("JSON");
    assert_eq!(gone["deleted"]["name"], "globex", "{gone}");

    // 6. The paths a load balancer or a person tries first.
    let health = http.get(format!("{url}/health")).send().await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    let root = common::get_json(&http, &format!("{url}/")).await;
    assert_eq!(root["name"], "sluice", "{root}");
    assert_eq!(root["ready"], "/readyz", "{root}");
}
