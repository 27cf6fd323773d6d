"""The files under deploy/ parse and agree with each other: the compose file
runs two replicas on one Redis and one PostgreSQL with Prometheus and
Grafana, every service that needs another waits for it, the Grafana
datasource the dashboard names is the provisioned one, and the chart's
values parse. (promtool checks the alerts in scripts/test; the metrics
they name are checked against the binary in crates/cli/tests/deploy.rs.)"""

import json
import pathlib

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parents[2] / "deploy"


def load(path):
    return yaml.safe_load((DEPLOY / path).read_text())


def test_compose_runs_two_replicas_on_shared_redis_and_postgres():
    compose = load("compose.yaml")
    services = compose["services"]
    for name in ("sluice-1", "sluice-2", "redis", "postgres", "prometheus", "grafana"):
        assert name in services, name
    replicas = [s for n, s in services.items() if n.startswith("sluice-")]
    ids = set()
    for s in replicas:
        env = s["environment"]
        assert env["SLUICE_REDIS__URL"] == "redis://redis:6379"
        assert env["SLUICE_JOBS__STORE"].startswith("postgres://")
        ids.add(env["SLUICE_REDIS__REPLICA_ID"])
        assert s["depends_on"]["redis"]["condition"] == "service_healthy"
        assert s["depends_on"]["postgres"]["condition"] == "service_healthy"
        # Published on loopback only.
        assert all(p.startswith("127.0.0.1:") for p in s["ports"])
        # The config file it mounts exists.
        mounted = s["volumes"][0].split(":")[0]
        assert (DEPLOY / mounted).is_file(), mounted
    assert len(ids) == 2, "each replica needs its own replica_id"
    for name in ("redis", "postgres"):
        assert "healthcheck" in services[name], name


def test_prometheus_scrapes_both_replicas_with_the_metrics_token():
    prom = load("prometheus/prometheus.yml")
    job = prom["scrape_configs"][0]
    targets = job["static_configs"][0]["targets"]
    assert sorted(targets) == ["sluice-1:8080", "sluice-2:8080"]
    compose = load("compose.yaml")
    token_default = compose["x-sluice"]["environment"]["SLUICE_METRICS__TOKEN"]
    assert job["authorization"]["credentials"] in token_default
    assert (DEPLOY / "prometheus" / prom["rule_files"][0]).is_file()


def test_grafana_dashboard_uses_the_provisioned_datasource():
    ds = load("grafana/provisioning/datasources/prometheus.yaml")["datasources"][0]
    dash = json.loads((DEPLOY / "grafana" / "sluice.json").read_text())
    assert dash["panels"], "a dashboard with panels"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for panel in dash["panels"]:
        assert panel["datasource"]["uid"] == ds["uid"], panel["title"]
        assert panel["targets"], panel["title"]
        for t in panel["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]


def test_chart_metadata_and_values_parse():
    chart = load("helm/sluice/Chart.yaml")
    assert chart["apiVersion"] == "v2" and chart["name"] == "sluice"
    values = load("helm/sluice/values.yaml")
    assert values["replicaCount"] >= 2
    assert values["podSecurityContext"]["runAsNonRoot"] is True
    # The pod's grace period (drain + 5 s) outlasts the drain.
    assert values["drainTimeoutMs"] > 0
    templates = {p.name for p in (DEPLOY / "helm/sluice/templates").iterdir()}
    for name in ("deployment.yaml", "service.yaml", "configmap.yaml", "secret.yaml"):
        assert name in templates, name
