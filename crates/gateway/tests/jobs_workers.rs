//! Jobs run by the gateway's own workers (`sluice serve`'s default)
//! against `sluice sim`: an `http` job that completes against the sim's
//! Slack, Discord jobs against the sim's Discord, and jobs against a
//! failing upstream that go dead and come back when retried; a kind of
//! the embedder's own, registered through `Gateway::bind_with`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Harness, TempDir, base_config, expect_error, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::Gateway;
use sluice_jobs::worker::{JobHandler, Outcome, handler_fn};
use sluice_jobs::{Kind, Kinds, PayloadError};
use sluice_sim::{Faults, Scope};

/// How long a job may take to reach a state: far beyond what any needs
/// (retries back off from 1 s), a bound rather than a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

async fn enqueue(h: &Harness, body: &Value) -> i64 {
    let res = h
        .post("/v1/jobs", body)
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(res.status(), StatusCode::CREATED);
    let job: Value = res.json().await.unwrap();
    job["id"].as_i64().unwrap()
}

/// Job `id` from the gateway at `base` (`http://{addr}`).
async fn job(http: &reqwest::Client, base: &str, id: i64) -> Value {
    let res = http
        .get(format!("{base}/v1/jobs/{id}"))
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.json().await.unwrap()
}

/// Polls job `id` until it is in `state`; panics if it never gets there
/// or ends in another final state.
async fn until_state(http: &reqwest::Client, base: &str, id: i64, state: &str) -> Value {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    loop {
        let j = job(http, base, id).await;
        if j["state"] == state {
            return j;
        }
        let fin = ["completed", "dead", "cancelled"];
        assert!(
            !fin.contains(&j["state"].as_str().unwrap_or("")),
            "job {id} ended {} instead of {state}: {j}",
            j["state"]
        );
        assert!(
            tokio::time::Instant::now() < give_up,
            "job {id} never became {state}: {j}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn http_job(api: &str, path: &str, max_attempts: u32) -> Value {
    json!({
        "queue": "default",
        "kind": "http",
        "max_attempts": max_attempts,
        "payload": {"api": api, "method": "POST", "path": path, "body": {"text": "hello"}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_job_runs_against_the_sims_slack_and_completes() {
    let h = Harness::start().await;
    let id = enqueue(&h, &http_job("slack", "/api/chat.postMessage", 3)).await;
    let done = until_state(&h.http, &h.url(""), id, "completed").await;
    assert_eq!(done["attempts"], 1);
    assert!(!done["result"].is_null(), "the response is kept: {done}");
    assert!(done["finished_at"].is_i64());
    // The call went to the configured base URL, once.
    let calls: Vec<_> = h
        .sim
        .log(0)
        .entries
        .into_iter()
        .filter(|e| e.path == "/slack/api/chat.postMessage")
        .collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!((calls[0].method.as_str(), calls[0].status), ("POST", 200));

    let metrics = h.metrics().await;
    assert!(
        metrics.contains("sluice_jobs_completed_total{queue=\"default\",kind=\"http\"}"),
        "{metrics}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_against_a_failing_upstream_goes_dead_and_a_retry_revives_it() {
    let h = Harness::start().await;
    let broken = Faults {
        error_every: Some(1),
        error_statuses: vec![503],
        ..Faults::none()
    };
    h.sim
        .set_faults(Scope::Api("github".into()), broken)
        .unwrap();
    let id = enqueue(&h, &http_job("github", "/repos/o/r/issues", 2)).await;
    let dead = until_state(&h.http, &h.url(""), id, "dead").await;
    assert_eq!(dead["attempts"], 2, "both attempts used: {dead}");
    assert!(
        dead["last_error"].as_str().unwrap().contains("503"),
        "{dead}"
    );

    // The upstream heals; the dead letter is retried and completes.
    h.sim
        .set_faults(Scope::Api("github".into()), Faults::none())
        .unwrap();
    let res = h
        .post(&format!("/v1/jobs/{id}/retry"), &json!({}))
        .header("x-sluice-workspace", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let done = until_state(&h.http, &h.url(""), id, "completed").await;
    assert_eq!(
        done["attempts"], 1,
        "a retry from dead starts its attempts over"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_goes_dead_at_once() {
    // An API the sim does not serve: every call is a 404.
    let h = Harness::with(sim_config(), |c| {
        let mut ghost = c.api("slack").expect("slack is configured").clone();
        ghost.name = "ghost".into();
        ghost.base_url = ghost.base_url.replace("/slack", "/ghost");
        c.apis.push(ghost);
    })
    .await;
    let id = enqueue(&h, &http_job("ghost", "/things", 3)).await;
    let dead = until_state(&h.http, &h.url(""), id, "dead").await;
    assert_eq!(dead["attempts"], 1, "retrying cannot fix a 404: {dead}");
    assert!(
        dead["last_error"].as_str().unwrap().contains("404"),
        "{dead}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_jobs_run_against_the_sims_discord() {
    let h = Harness::with(sim_config(), |c| {
        for api in &mut c.apis {
            if api.name == "discord" {
                api.base_url = format!("{}/api/v10", api.base_url);
            }
        }
    })
    .await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let body = json!({
            "queue": "discord",
            "kind": "discord.create_role",
            "group": "guild:81384788765712384",
            "payload": {"guild_id": "81384788765712384", "name": format!("role-{n}")}
        });
        ids.push(enqueue(&h, &body).await);
    }
    for id in ids {
        until_state(&h.http, &h.url(""), id, "completed").await;
    }
    let report = h.sim.discord();
    assert_eq!(report.effects.len(), 5, "one role each: {report:?}");
    assert_eq!(report.global_429, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_and_proxied_calls_share_the_apis_bucket() {
    // Slack allows one call per 100 s: whoever takes it, the other waits.
    let h = Harness::with(sim_config(), |c| {
        for api in &mut c.apis {
            if api.name == "slack" {
                api.requests_per_second = 0.01;
                api.burst = 1;
            }
        }
    })
    .await;
    let id = enqueue(&h, &http_job("slack", "/api/chat.postMessage", 3)).await;
    until_state(&h.http, &h.url(""), id, "completed").await;
    // The job took the token: a proxied call to Slack is refused for now.
    let res = h
        .post("/proxy/slack/api/chat.postMessage", &json!({"text": "hi"}))
        .header("x-sluice-timeout-ms", "1000")
        .send()
        .await
        .unwrap();
    let e = common::expect_error(res, 429, "rate_limited").await;
    assert!(e["message"].as_str().unwrap().contains("api:slack"), "{e}");
    h.stop().await;
}

/// A kind defined outside `sluice-jobs-http` (here, in this test crate):
/// reverses a short text.
#[derive(Debug)]
struct Reverse;

impl Kind for Reverse {
    fn name(&self) -> &str {
        "text.reverse"
    }

    fn check(&self, payload: &Value) -> Result<(), PayloadError> {
        match payload.get("text") {
            Some(Value::String(t)) if t.len() <= 100 => Ok(()),
            _ => Err(PayloadError::at(
                "text",
                "must be a string of at most 100 bytes",
            )),
        }
    }

    fn handler(&self) -> Arc<dyn JobHandler> {
        Arc::new(handler_fn(|job| async move {
            let text = job.payload["text"].as_str().unwrap_or_default();
            Outcome::Completed(json!({"reversed": text.chars().rev().collect::<String>()}))
        }))
    }
}

/// A kind the embedder registers (`Gateway::bind_with`) is accepted by
/// `POST /v1/jobs`, its payload checked by the kind (the error naming the
/// field), and run by the gateway's workers; the standard kinds still are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_of_the_embedders_own_is_enqueued_through_the_api_and_run() {
    let dir = TempDir::new();
    // Nothing here calls an upstream: the sim's address is never used.
    let config = base_config("http://127.0.0.1:9", dir.path());
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let gateway = Gateway::bind_with(config, listen, Kinds::new().with(Reverse))
        .await
        .unwrap();
    let base = format!("http://{}", gateway.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let test = async move {
        let http = reqwest::Client::new();
        let post = |body: Value| {
            http.post(format!("{base}/v1/jobs"))
                .header("x-sluice-workspace", "acme")
                .json(&body)
                .send()
        };
        let job = |payload: Value| json!({"queue": "default", "kind": "text.reverse", "payload": payload});

        let e = expect_error(
            post(job(json!({"text": 5}))).await.unwrap(),
            400,
            "invalid_request",
        )
        .await;
        assert_eq!(e["param"], "payload.text", "{e}");
        let e = expect_error(
            post(json!({"queue": "default", "kind": "text.rot13", "payload": {}}))
                .await
                .unwrap(),
            400,
            "invalid_request",
        )
        .await;
        assert_eq!(e["param"], "kind", "{e}");
        let listed = e["message"].as_str().unwrap();
        assert!(
            listed.contains("text.reverse") && listed.contains("http"),
            "{e}"
        );

        let res = post(job(json!({"text": "sluice"}))).await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let id = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
        let done = until_state(&http, &base, id, "completed").await;
        assert_eq!(done["result"], json!({"reversed": "eciuls"}), "{done}");
        let _ = stop.send(());
    };
    let (served, ()) = tokio::join!(
        gateway.serve(async {
            let _ = stopped.await;
        }),
        test
    );
    served.unwrap();
}

/// A kind named as a standard one would be shadowed or shadow it: the
/// gateway refuses to start, naming it.
#[tokio::test]
async fn a_kind_named_as_a_standard_one_is_refused_at_start() {
    #[derive(Debug)]
    struct Http;
    impl Kind for Http {
        fn name(&self) -> &str {
            "http"
        }
        fn check(&self, _: &Value) -> Result<(), PayloadError> {
            Ok(())
        }
        fn handler(&self) -> Arc<dyn JobHandler> {
            Arc::new(handler_fn(|_| async { Outcome::fatal("never runs") }))
        }
    }
    let dir = TempDir::new();
    let config = base_config("http://127.0.0.1:9", dir.path());
    let listen = Some("127.0.0.1:0".parse().unwrap());
    let e = Gateway::bind_with(config, listen, Kinds::new().with(Http))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"http\" is a standard kind"), "{e}");
}
