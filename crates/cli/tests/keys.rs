//! `sluice tiers`, `sluice tenants` and `sluice keys` against a running
//! `sluice serve`: create, issue (the key printed once), list, rotate,
//! revoke and block, and errors that name the field; `sluice audit`
//! shows what they did.

mod common;

use std::process::{Command, Output};

use common::Serve;
use serde_json::Value;

const ADMIN: &str = "s3cret";

struct Fixture {
    serve: Serve,
}

impl Fixture {
    fn start() -> Fixture {
        Fixture {
            serve: Serve::with_admin("cli-keys", ADMIN),
        }
    }

    /// Runs `sluice ARGS --target URL --admin-token TOKEN`.
    fn run(&self, args: &[&str], token: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(args).args(["--target", &self.serve.url]);
        if let Some(t) = token {
            cmd.args(["--admin-token", t]);
        }
        cmd.env_remove("SLUICE_ADMIN_TOKEN")
            .env_remove("SLUICE_TARGET")
            .output()
            .expect("sluice runs")
    }

    fn ok(&self, args: &[&str]) -> String {
        common::succeeded(&format!("sluice {args:?}"), self.run(args, Some(ADMIN)))
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.ok(&all)).expect("JSON on stdout")
    }

    fn fails(&self, args: &[&str], token: Option<&str>) -> String {
        let out = self.run(args, token);
        assert_eq!(out.status.code(), Some(1), "sluice {args:?}: {out:?}");
        String::from_utf8(out.stderr).unwrap()
    }
}

#[test]
fn keys_tenants_and_tiers_from_the_command_line() {
    let f = Fixture::start();
    let out = f.ok(&[
        "tiers", "create", "free", "--rpm", "60", "--model", "openai/*",
    ]);
    assert!(out.contains("requests_per_minute=60"), "{out}");
    let out = f.ok(&["tiers", "list"]);
    assert!(out.starts_with("NAME") && out.contains("free"), "{out}");
    let err = f.fails(&["tiers", "create", "pro", "--rps", "0"], Some(ADMIN));
    assert!(err.contains("limits.requests_per_second"), "{err}");

    f.ok(&[
        "tenants", "create", "acme", "--tier", "free", "--tag", "team-a",
    ]);
    let err = f.fails(
        &["tenants", "create", "globex", "--tier", "gold"],
        Some(ADMIN),
    );
    assert!(err.contains("400") && err.contains("`tier`"), "{err}");
    let out = f.ok(&["tenants", "list"]);
    assert!(out.contains("acme") && out.contains("active"), "{out}");

    // The key is printed once, by the issue.
    let out = f.ok(&[
        "keys", "issue", "--tenant", "acme", "--name", "ci", "--tpm", "1000",
    ]);
    let key = out
        .lines()
        .find_map(|l| l.strip_prefix("key: "))
        .expect("the key is printed")
        .to_owned();
    assert!(key.starts_with("sk-sluice-"), "{out}");
    let id = key["sk-sluice-".len()..]
        .split('_')
        .next()
        .unwrap()
        .to_owned();
    let listed = f.ok(&["keys", "list", "--tenant", "acme"]);
    assert!(listed.contains(&id) && !listed.contains(&key), "{listed}");
    assert!(listed.contains("tokens_per_minute=1000"), "{listed}");

    let rotated = f.json(&["keys", "rotate", &id, "--grace", "120"]);
    assert_eq!(rotated["previous"]["id"], id.as_str());
    assert_eq!(rotated["previous"]["state"], "rotated");
    let new_id = rotated["id"].as_str().unwrap().to_owned();
    let out = f.ok(&["keys", "block", &new_id]);
    assert!(out.contains("blocked"), "{out}");
    let out = f.ok(&["keys", "revoke", &new_id]);
    assert!(out.contains("revoked"), "{out}");
    let err = f.fails(&["keys", "unblock", &new_id], Some(ADMIN));
    assert!(err.contains("409"), "{err}");

    let err = f.fails(&["keys", "list"], None);
    assert!(
        err.contains("401") && err.contains("--admin-token"),
        "{err}"
    );
    let err = f.fails(&["keys", "list"], Some("wrong"));
    assert!(err.contains("403"), "{err}");

    // Every act above is in the audit trail; the writer is a batch behind.
    let mut found = Value::Null;
    for _ in 0..500 {
        found = f.json(&["audit", "--kind", "key"]);
        if found["entries"].as_array().map_or(0, Vec::len) >= 4 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let kinds: Vec<&str> = found["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["key.revoke", "key.block", "key.rotate", "key.issue"],
        "newest first: {found}"
    );
    let table = f.ok(&["audit", "--actor", "admin", "--limit", "2"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("TIME (UTC)") && lines[0].contains("CHANGE"),
        "{table}"
    );
    assert!(
        lines[1].contains("key.revoke") && lines[1].contains(&new_id),
        "{table}"
    );
    assert!(lines[1].contains("state: blocked→revoked"), "{table}");
    assert!(lines[3].starts_with("more: --before "), "{table}");
    let err = f.fails(&["audit", "--limit", "0"], Some(ADMIN));
    assert!(err.contains("400") && err.contains("limit"), "{err}");
    let err = f.fails(&["audit", "--from", "yesterday"], Some(ADMIN));
    assert!(err.contains("`from`"), "{err}");
}

#[test]
fn budgets_from_the_command_line() {
    let f = Fixture::start();
    let tier = f.json(&[
        "tiers",
        "create",
        "pro",
        "--rpm",
        "60",
        "--budget",
        "name=monthly,money=25.50,period=month,time_zone=Europe/Paris",
    ]);
    assert_eq!(tier["budgets"][0]["money"], "25.5");
    assert_eq!(tier["budgets"][0]["time_zone"], "Europe/Paris");
    // Budgets alone leave the tier's limits as they were.
    let out = f.ok(&[
        "tiers",
        "update",
        "pro",
        "--budget",
        "name=daily,requests=1000,window_seconds=86400",
    ]);
    assert!(
        out.contains("requests_per_minute=60") && out.contains("daily(requests=1000"),
        "{out}"
    );
    // A bad budget is refused naming its field.
    for (spec, field) in [
        (
            "name=m,tokens=5,period=day,time_zone=Mars/Olympus",
            "budgets[0].time_zone",
        ),
        ("name=m,tokens=5,period=year", "budgets[0].period"),
    ] {
        let err = f.fails(
            &["tenants", "create", "acme", "--budget", spec],
            Some(ADMIN),
        );
        assert!(err.contains("400") && err.contains(field), "{err}");
    }
    let t = f.json(&[
        "tenants",
        "create",
        "acme",
        "--tier",
        "pro",
        "--budget",
        "name=weekly,tokens=100000,period=week",
    ]);
    assert_eq!(t["budgets"][0]["tokens"], 100_000);
}

/// `sluice keys delete` and `sluice tenants delete`: gone from the lists,
/// refused at once, audited; another tenant untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_tenants_are_deleted_for_good() {
    let f = Fixture::start();
    for t in ["acme", "globex"] {
        f.ok(&["tenants", "create", t]);
    }
    let issue = |tenant: &str| -> (String, String) {
        let k = f.json(&["keys", "issue", "--tenant", tenant]);
        (
            k["key"].as_str().unwrap().to_owned(),
            k["id"].as_str().unwrap().to_owned(),
        )
    };
    let (key1, id1) = issue("acme");
    let (key2, id2) = issue("acme");
    let (other, _) = issue("globex");
    // A key's own usage answers while the key exists.
    let http = common::client();
    let url = format!("{}/v1/usage", f.serve.url);
    let usage = |key: &str| {
        let req = http.get(&url).bearer_auth(key).send();
        async move { req.await.expect("the gateway answers").status().as_u16() }
    };
    assert_eq!(usage(&key1).await, 200);

    let out = f.ok(&["keys", "delete", &id1]);
    assert!(
        out.contains(&format!("deleted key {id1} of tenant acme")),
        "{out}"
    );
    assert_eq!(usage(&key1).await, 401, "a deleted key is refused");
    assert_eq!(usage(&key2).await, 200);
    let listed = f.ok(&["keys", "list", "--tenant", "acme"]);
    assert!(!listed.contains(&id1) && listed.contains(&id2), "{listed}");
    let err = f.fails(&["keys", "delete", &id1], Some(ADMIN));
    assert!(err.contains("404"), "{err}");

    let gone = f.json(&["tenants", "delete", "acme"]);
    assert_eq!(gone["deleted"]["name"], "acme");
    assert_eq!(gone["keys_deleted"], serde_json::json!([id2]));
    assert_eq!(
        usage(&key2).await,
        401,
        "a deleted tenant's keys are refused"
    );
    assert_eq!(usage(&other).await, 200, "another tenant's key still works");
    let out = f.ok(&["tenants", "list"]);
    assert!(!out.contains("acme") && out.contains("globex"), "{out}");
    let err = f.fails(&["tenants", "delete", "acme"], Some(ADMIN));
    assert!(err.contains("404"), "{err}");

    let mut kinds = Vec::new();
    for _ in 0..500 {
        let found = f.json(&["audit", "--limit", "2"]);
        kinds = found["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect();
        if kinds.first().is_some_and(|k| k == "tenant.delete") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(kinds, ["tenant.delete", "key.delete"]);
}
