//! The control endpoints: stats, the request log, limits at runtime,
//! reset, and their refusals.

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_sim::{Limits, LogPage, Scope, SimConfig, Stats};

#[tokio::test]
async fn stats_count_requests_statuses_and_tokens() {
    let sim = start(limited_model("gpt-4o", Limits::per_second(0.001).burst(2))).await;
    for _ in 0..3 {
        post(&sim, "/v1/chat/completions", &chat("gpt-4o")).await;
    }
    post(&sim, "/v1/messages", &message("claude-x")).await;
    post(&sim, "/github/repos", &json!({})).await;
    let stats: Stats = get_json(&sim, "/_sim/stats", &[]).await;
    assert_eq!(stats.models, sim.stats().models);
    let c = stats.model("gpt-4o");
    assert_eq!(
        (
            c.requests,
            c.admitted,
            c.ok,
            c.rate_limited,
            c.server_errors
        ),
        (3, 2, 2, 1, 0)
    );
    assert_eq!((c.tokens_in, c.tokens_out), (10, 48));
    assert_eq!(c.admitted_per_second.total(), 2);
    assert_eq!(stats.model("claude-x").tokens_in, 3);
    assert_eq!(stats.api("github").ok, 1);

    let r = client()
        .post(format!("{}/_sim/reset", sim.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let c = sim.stats().model("gpt-4o");
    assert_eq!(
        (
            c.requests,
            c.admitted,
            c.tokens_in,
            c.admitted_per_second.total()
        ),
        (0, 0, 0, 0)
    );
    assert_eq!(c.provider.as_deref(), Some("openai"));
    // Reset zeroes counters, not the quota: the bucket is still empty.
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o")).await,
        429
    );
}

#[tokio::test]
async fn log_records_paths_keys_and_statuses() {
    let sim = start(SimConfig::unlimited()).await;
    for key in ["job-1", "job-2"] {
        let r = client()
            .post(format!("{}/discord/guilds/1/roles", sim.url()))
            .header("Idempotency-Key", key)
            .json(&json!({"name": "mod"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    post(&sim, "/v1/chat/completions", &chat("gpt-4o")).await;
    let page: LogPage = get_json(&sim, "/_sim/log?since=0", &[]).await;
    assert_eq!(page.entries.len(), 3);
    assert_eq!(page.next, 3);
    let first = &page.entries[0];
    assert_eq!(
        (first.method.as_str(), first.path.as_str()),
        ("POST", "/discord/guilds/1/roles")
    );
    assert_eq!(first.idempotency_key.as_deref(), Some("job-1"));
    assert_eq!(
        (first.status, first.target.as_deref()),
        (200, Some("discord"))
    );
    assert_eq!(page.entries[2].target.as_deref(), Some("gpt-4o"));
    let page: LogPage = get_json(&sim, "/_sim/log?since=2", &[]).await;
    assert_eq!(page.entries.len(), 1);
    assert!(sim.log(3).entries.is_empty());
    // Admin reads are not logged.
    assert_eq!(sim.log(0).next, 3);
}

#[tokio::test]
async fn limits_change_at_runtime() {
    let sim = start(SimConfig::unlimited()).await;
    let url = format!("{}/_sim/limits", sim.url());
    let body = json!({"api": "linear", "limits": {"requests_per_second": 0.001, "burst": 1}});
    assert_eq!(
        client()
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(status_of(&sim, "/linear/issues", &json!({})).await, 200);
    assert_eq!(status_of(&sim, "/linear/issues", &json!({})).await, 429);
    sim.set_limits(Scope::Api("linear".into()), Limits::unlimited())
        .unwrap();
    assert_eq!(status_of(&sim, "/linear/issues", &json!({})).await, 200);

    let body = json!({"model": "gpt-4o", "limits": {"requests_per_second": 0.001, "burst": 1}});
    assert_eq!(
        client()
            .post(&url)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = post(&sim, "/v1/chat/completions", &chat("gpt-4o")).await;
    assert_eq!(header(&r, "x-ratelimit-limit-requests").unwrap(), "1");
    assert_eq!(
        status_of(&sim, "/v1/chat/completions", &chat("gpt-4o")).await,
        429
    );
}

#[tokio::test]
async fn bad_admin_requests_are_refused_by_name() {
    let sim = start(SimConfig::unlimited()).await;
    let send = |path: &'static str, body: Value| {
        let url = format!("{}{path}", sim.url());
        async move {
            let r = client().post(url).json(&body).send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap()["error"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        }
    };
    let (status, err) = send("/_sim/faults", json!({"faults": {"error_rate": 2.0}})).await;
    assert_eq!(status, 400);
    assert!(err.contains("faults.error_rate"), "{err}");
    let (status, err) = send("/_sim/faults", json!({"faults": {"eror_rate": 0.5}})).await;
    assert_eq!(status, 400);
    assert!(err.contains("eror_rate"), "{err}");
    let (status, _) = send(
        "/_sim/faults",
        json!({"model": "a", "api": "b", "faults": {}}),
    )
    .await;
    assert_eq!(status, 400);
    let (status, err) = send(
        "/_sim/limits",
        json!({"limits": {"requests_per_second": 1}}),
    )
    .await;
    assert_eq!(status, 400, "{err}");
    let (status, err) = send(
        "/_sim/limits",
        json!({"model": "m", "limits": {"requests_per_second": 0}}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(err.contains("limits.requests_per_second"), "{err}");
    let (status, _) = send("/_sim/limits", json!({"api": "nope", "limits": {}})).await;
    assert_eq!(status, 400);
}
