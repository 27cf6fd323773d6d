//! Upstream credentials per tenant (issue 18: "one shared credential per
//! SaaS API for every tenant"), against a gateway with three tenants in
//! front of the simulator, whose APIs echo the `Authorization` they got:
//!
//! - a tenant's proxied call and its jobs carry its own token;
//! - a tenant without one gets the API's shared token where the API
//!   shares it (the default), and 403 `no_credential` where it does not,
//!   without anything reaching the upstream;
//! - the same for model providers' keys.
//!
//! The values are given as the configuration's secrets, as `load` reads
//! them from the environment (tests cannot set the process's).

mod common;

use std::time::Duration;

use common::{Harness, chat, expect_error, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_gateway::config::{Config, TenantApi, TenantConfig, TenantProvider};
use sluice_sim::SimConfig;

/// Tenant keys: acme and globex have tokens of their own, initech none.
const ACME: &str = "key-acme";
const GLOBEX: &str = "key-globex";
const INITECH: &str = "key-initech";

/// Slack: a shared token and acme's and globex's own. GitHub: acme's own
/// only, no shared one.
fn setup(c: &mut Config) {
    c.secrets.insert("SLACK_TOKEN", "xoxb-shared");
    c.secrets.insert("ACME_SLACK", "xoxb-acme");
    c.secrets.insert("GLOBEX_SLACK", "xoxb-globex");
    c.secrets.insert("ACME_GITHUB", "ghp-acme");
    c.apis
        .iter_mut()
        .find(|a| a.name == "slack")
        .unwrap()
        .auth_env = Some("SLACK_TOKEN".into());
    for (name, key) in [("acme", ACME), ("globex", GLOBEX), ("initech", INITECH)] {
        c.tenants.push(TenantConfig::new(name, key));
    }
    let own = |var: &str| TenantApi {
        auth_env: var.into(),
    };
    c.tenants[0].apis.insert("slack".into(), own("ACME_SLACK"));
    c.tenants[0]
        .apis
        .insert("github".into(), own("ACME_GITHUB"));
    c.tenants[1]
        .apis
        .insert("slack".into(), own("GLOBEX_SLACK"));
}

fn no_sharing(c: &mut Config, api: &str) {
    c.apis
        .iter_mut()
        .find(|a| a.name == api)
        .unwrap()
        .shared_auth = false;
}

/// `method /proxy/{api}/…` as the tenant with `key`.
async fn proxy(h: &Harness, key: &str, path: &str) -> reqwest::Response {
    h.http
        .post(h.url(path))
        .bearer_auth(key)
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .expect("the gateway answers")
}

/// The `Authorization` the sim's API received for a proxied call.
async fn upstream_auth(h: &Harness, key: &str, path: &str) -> Value {
    let res = proxy(h, key, path).await;
    assert_eq!(res.status(), StatusCode::OK, "{path} as {key}");
    let body: Value = res.json().await.unwrap();
    body["authorization"].clone()
}

/// Calls the sim's API `api` answered so far.
fn calls_to(h: &Harness, api: &str) -> usize {
    let prefix = format!("/{api}/");
    (h.sim.log(0).entries.iter())
        .filter(|e| e.path.starts_with(&prefix))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenants_proxied_call_carries_its_own_token() {
    let h = Harness::with(sim_config(), setup).await;
    let slack = "/proxy/slack/chat.postMessage";
    assert_eq!(upstream_auth(&h, ACME, slack).await, "Bearer xoxb-acme");
    assert_eq!(upstream_auth(&h, GLOBEX, slack).await, "Bearer xoxb-globex");
    // Without a token of its own, the shared one: sharing is the default.
    assert_eq!(
        upstream_auth(&h, INITECH, slack).await,
        "Bearer xoxb-shared"
    );
    // The tenant's Sluice key never goes upstream.
    let github = "/proxy/github/repos/o/r/issues";
    assert_eq!(upstream_auth(&h, ACME, github).await, "Bearer ghp-acme");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sharing_a_tenant_without_its_own_token_is_refused() {
    let h = Harness::with(sim_config(), |c| {
        setup(c);
        no_sharing(c, "slack");
    })
    .await;
    let slack = "/proxy/slack/chat.postMessage";
    assert_eq!(upstream_auth(&h, ACME, slack).await, "Bearer xoxb-acme");
    let before = calls_to(&h, "slack");
    let e = expect_error(proxy(&h, INITECH, slack).await, 403, "no_credential").await;
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("\"slack\""), "{message}");
    assert!(message.contains("initech"), "{message}");
    assert_eq!(calls_to(&h, "slack"), before, "nothing reached Slack");
    // GitHub has acme's token and no shared one: the others are refused,
    // rather than sent upstream bare or with acme's.
    let github = "/proxy/github/repos/o/r/issues";
    assert_eq!(upstream_auth(&h, ACME, github).await, "Bearer ghp-acme");
    for key in [GLOBEX, INITECH] {
        let e = expect_error(proxy(&h, key, github).await, 403, "no_credential").await;
        assert!(e["message"].as_str().unwrap().contains("\"github\""), "{e}");
    }
    assert_eq!(calls_to(&h, "github"), 1);
    // An API with no credential configured at all sends none, as before.
    assert_eq!(
        upstream_auth(&h, INITECH, "/proxy/linear/graphql").await,
        Value::Null
    );
    h.stop().await;
}

/// Enqueues an `http` job to `api` as the tenant with `key`.
async fn enqueue(h: &Harness, key: &str, api: &str) -> reqwest::Response {
    let job = json!({
        "queue": "default",
        "kind": "http",
        "max_attempts": 1,
        "payload": {"api": api, "method": "POST", "path": "/chat.postMessage", "body": {"text": "hi"}}
    });
    h.post("/v1/jobs", &job)
        .bearer_auth(key)
        .send()
        .await
        .expect("the gateway answers")
}

/// Waits (boundedly) for job `id` to finish; its final state.
async fn finished(h: &Harness, key: &str, id: i64) -> Value {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let res = h.get(&format!("/v1/jobs/{id}")).bearer_auth(key).send();
        let job: Value = res.await.unwrap().json().await.unwrap();
        if ["completed", "dead", "cancelled"].contains(&job["state"].as_str().unwrap_or("")) {
            return job;
        }
        assert!(tokio::time::Instant::now() < give_up, "job {id}: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_job_carries_its_own_token_and_one_without_is_refused() {
    let h = Harness::with(sim_config(), |c| {
        setup(c);
        no_sharing(c, "slack");
    })
    .await;
    for (key, token) in [(ACME, "Bearer xoxb-acme"), (GLOBEX, "Bearer xoxb-globex")] {
        let res = enqueue(&h, key, "slack").await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let id = res.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
        let job = finished(&h, key, id).await;
        assert_eq!(job["state"], "completed", "{job}");
        assert_eq!(job["result"]["body"]["authorization"], token, "{job}");
    }
    // A job its tenant may not run is refused when it is enqueued.
    let e = expect_error(enqueue(&h, INITECH, "slack").await, 403, "no_credential").await;
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("payload.api"), "{message}");
    assert!(message.contains("\"slack\""), "{message}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_calls_use_the_tenants_own_provider_key() {
    // The sim takes one key only: acme's own.
    let sim = SimConfig {
        api_key: Some("sk-acme".into()),
        ..sim_config()
    };
    let h = Harness::with(sim, |c| {
        setup(c);
        c.secrets.insert("OPENAI_SHARED", "sk-shared");
        c.secrets.insert("ACME_OPENAI", "sk-acme");
        let openai = c.providers.iter_mut().find(|p| p.name == "openai").unwrap();
        openai.api_key_env = Some("OPENAI_SHARED".into());
        c.tenants[0].providers.insert(
            "openai".into(),
            TenantProvider {
                api_key_env: "ACME_OPENAI".into(),
            },
        );
    })
    .await;
    let call = |key: &'static str| {
        h.post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(call(ACME).await.unwrap().status(), StatusCode::OK);
    // Globex has no key of its own: the shared one went, and the sim,
    // which knows only acme's, refused it.
    assert_eq!(
        call(GLOBEX).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    h.stop().await;

    let h = Harness::with(sim_config(), |c| {
        setup(c);
        c.secrets.insert("OPENAI_SHARED", "sk-shared");
        let openai = c.providers.iter_mut().find(|p| p.name == "openai").unwrap();
        openai.api_key_env = Some("OPENAI_SHARED".into());
        openai.shared_auth = false;
    })
    .await;
    let res = h
        .post("/v1/chat/completions", &chat("openai/gpt-4o-mini"))
        .bearer_auth(GLOBEX)
        .send()
        .await
        .unwrap();
    let e = expect_error(res, 403, "no_credential").await;
    assert!(e["message"].as_str().unwrap().contains("\"openai\""), "{e}");
    h.stop().await;
}
