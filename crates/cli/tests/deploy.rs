//! What `deploy/` ships holds against the binary it deploys: every metric
//! the alerts and the Grafana dashboard name is a family the gateway
//! describes,
//! the deployment config passes `check-config`, the image's health check
//! command answers by the gateway's health, and the image runs unprivileged.
//! (`promtool check rules` / `test rules` run the alerts themselves in
//! scripts/test; tests/python/test_deploy.py reads the compose file.)

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use common::{Serve, TempDir};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `sluice_…` metric names in `text`, histogram series (`_bucket`,
/// `_sum`, `_count`) named by their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("sluice_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.insert(family.to_owned());
        rest = &tail[end..];
    }
    names
}

fn gateway(dir: &TempDir) -> Serve {
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!("data_dir = {:?}\n", dir.join("data").display().to_string()),
    )
    .expect("config written");
    Serve::start(&config)
}

#[test]
fn every_metric_the_alerts_and_the_dashboard_name_is_exported() {
    // The families the gateway describes (its `# HELP` and `# TYPE` lines);
    // `sluice_gateway` checks that each is rendered.
    let exported: BTreeSet<String> = sluice_gateway::metrics::families()
        .map(str::to_owned)
        .collect();
    for file in [
        "deploy/prometheus/alerts.yaml",
        "deploy/grafana/sluice.json",
    ] {
        let named = metric_names(&read(file));
        assert!(!named.is_empty(), "{file} names no metric");
        let missing: Vec<_> = named.difference(&exported).collect();
        assert!(
            missing.is_empty(),
            "{file} names metrics the gateway does not export: {missing:?}"
        );
    }
}

#[tokio::test]
async fn the_health_command_exits_by_the_gateways_answer() {
    let dir = TempDir::new("deploy-health");
    let serve = gateway(&dir);
    let health = |url: String| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["health", "--timeout-ms", "5000", "--url", &url])
            .output()
            .expect("sluice health runs")
    };
    let ok = health(format!("{}/healthz", serve.url));
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let missing = health(format!("{}/no-such-route", serve.url));
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"));
    // Nothing listens on port 1.
    let down = health("http://127.0.0.1:1/healthz".to_owned());
    assert_eq!(down.status.code(), Some(1));
}

#[test]
fn the_deployment_config_passes_check_config() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("check-config")
        .arg(repo().join("deploy/sluice.toml"))
        .env_remove("SLUICE_CONFIG")
        .output()
        .expect("sluice check-config runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("url = \"redis://redis:6379\""),
        "{printed}"
    );
}

#[test]
fn the_image_runs_unprivileged_with_a_health_check() {
    let dockerfile = read("Dockerfile");
    let last_stage = dockerfile
        .rsplit_once("\nFROM ")
        .map(|(_, s)| s)
        .expect("a multi-stage Dockerfile");
    let user = last_stage
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("the final stage names a USER");
    let uid = user.split(':').next().unwrap_or_default();
    assert!(
        uid.parse::<u32>().is_ok_and(|u| u != 0),
        "USER {user} must be a numeric non-root uid (Kubernetes runAsNonRoot checks it)"
    );
    assert!(last_stage.contains("HEALTHCHECK"), "no HEALTHCHECK");
    assert!(last_stage.contains("\"sluice\", \"health\""));
    // What the build stage copies exists.
    for line in dockerfile.lines().filter(|l| l.starts_with("COPY ")) {
        if line.contains("--from=") {
            continue;
        }
        let parts: Vec<_> = line.split_whitespace().collect();
        for src in &parts[1..parts.len() - 1] {
            assert!(repo().join(src).exists(), "COPY {src}: no such path");
        }
    }
    // The chart's image runs as the same user.
    let values = read("deploy/helm/sluice/values.yaml");
    assert!(values.contains(&format!("runAsUser: {uid}")), "{values}");
}
