//! The `http` kind against `sluice sim`'s SaaS APIs on 127.0.0.1.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{eventually, fast, sqlite};
use serde_json::json;
use sluice_jobs::worker::{QueueConfig, WorkerPool};
use sluice_jobs::{Job, JobId, JobState, JobStore, NewJob, SqliteStore};
use sluice_jobs_http::discord::DiscordConfig;
use sluice_jobs_http::http::HttpApis;
use sluice_jobs_http::{Credentials, Secret};
use sluice_limit::Limiter;
use sluice_sim::{Faults, Scope, Sim, SimConfig, SimHandle};

struct World {
    sim: SimHandle,
    store: Arc<SqliteStore>,
    limiter: Limiter,
    pool: WorkerPool,
}

async fn world() -> World {
    world_with(|apis| apis).await
}

/// A world whose APIs `edit` changes (adding credentials).
async fn world_with(edit: impl FnOnce(HttpApis) -> HttpApis) -> World {
    let sim = Sim::start(SimConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .expect("start the sim");
    let mut apis = HttpApis::new();
    for api in ["slack", "github", "linear", "ghost"] {
        apis = apis.api(api, &format!("{}/{api}", sim.url())).unwrap();
    }
    let apis = edit(apis);
    let store = Arc::new(sqlite().await);
    let limiter = Limiter::new(common::api_rules()).unwrap();
    let handlers = sluice_jobs_http::handlers(
        &limiter,
        apis,
        DiscordConfig::at(format!("{}/discord/api/v10", sim.url())),
        common::client(),
    )
    .unwrap();
    let pool = WorkerPool::builder(Arc::clone(&store), limiter.clone())
        .handlers(handlers)
        .queue(QueueConfig::new("api").unlimited())
        .configure(|c| {
            fast(c);
            c.max_throttles = 2;
        })
        .start()
        .unwrap();
    World {
        sim,
        store,
        limiter,
        pool,
    }
}

impl World {
    async fn enqueue(&self, payload: serde_json::Value, max_attempts: u32) -> JobId {
        let job = NewJob::new("api", "http", payload).max_attempts(max_attempts);
        self.store.enqueue(job).await.unwrap().job.id
    }

    async fn enqueue_for(&self, tenant: &str, payload: serde_json::Value) -> JobId {
        let job = NewJob::new("api", "http", payload).tenant(tenant);
        self.store.enqueue(job).await.unwrap().job.id
    }

    async fn finished(&self, id: JobId) -> Job {
        eventually(&format!("job {id} to finish"), || async {
            self.store.get(id).await.unwrap().unwrap().state.is_final()
        })
        .await;
        self.store.get(id).await.unwrap().unwrap()
    }
}

#[tokio::test]
async fn a_2xx_completes_with_status_headers_and_body() {
    let w = world().await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let payload = json!({
            "api": "slack", "method": "POST", "path": "/api/chat.postMessage",
            "headers": {"X-Trace": "t"}, "body": {"text": n}
        });
        ids.push(w.enqueue(payload, 3).await);
    }
    for (n, id) in ids.into_iter().enumerate() {
        let job = w.finished(id).await;
        assert_eq!(job.state, JobState::Completed, "{:?}", job.last_error);
        let result = job.result.unwrap();
        assert_eq!(result["status"], 200);
        assert_eq!(result["headers"]["content-type"], "application/json");
        assert_eq!(result["body"]["path"], "/api/chat.postMessage");
        assert_eq!(result["body"]["echo"], json!({"text": n}));
    }
    assert_eq!(w.sim.stats().api("slack").admitted, 5);
    w.pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_job_sends_its_tenants_own_token_and_never_anothers() {
    let slack = Credentials::shared(Secret::value("xoxb-shared"))
        .tenant("acme", Secret::value("xoxb-acme"))
        .not_shared();
    let w = world_with(|apis| apis.auth("slack", "Authorization", "Bearer ", slack)).await;
    let payload = json!({"api": "slack", "method": "POST", "path": "/api/auth.test"});
    let acme = w.enqueue_for("acme", payload.clone()).await;
    let globex = w.enqueue_for("globex", payload).await;
    let job = w.finished(acme).await;
    assert_eq!(job.state, JobState::Completed, "{:?}", job.last_error);
    assert_eq!(
        job.result.unwrap()["body"]["authorization"],
        "Bearer xoxb-acme"
    );
    // Globex has no token of its own and the shared one is not shared: the
    // job goes dead without calling, and without taking from the bucket.
    let job = w.finished(globex).await;
    assert_eq!((job.state, job.attempts), (JobState::Dead, 1));
    let error = job.last_error.unwrap();
    assert!(
        error.contains("no_credential") && error.contains("globex"),
        "{error}"
    );
    assert_eq!(w.sim.stats().api("slack").admitted, 1);
    w.pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn server_errors_are_retried_until_dead() {
    let w = world().await;
    let faults = Faults {
        error_every: Some(1),
        ..Faults::default()
    };
    w.sim
        .set_faults(Scope::Api("github".into()), faults)
        .unwrap();
    let id = w
        .enqueue(
            json!({"api": "github", "method": "GET", "path": "/repos/a/b"}),
            2,
        )
        .await;
    let job = w.finished(id).await;
    assert_eq!((job.state, job.attempts), (JobState::Dead, 2));
    let error = job.last_error.unwrap();
    assert!(error.contains("github answered 5"), "{error}");
    w.pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_429_reschedules_without_an_attempt_and_throttles_the_shared_bucket() {
    let w = world().await;
    let faults = Faults {
        force_429: true,
        force_429_retry_after_ms: 20,
        ..Faults::default()
    };
    w.sim
        .set_faults(Scope::Api("linear".into()), faults)
        .unwrap();
    let id = w
        .enqueue(
            json!({"api": "linear", "path": "/graphql", "body": {"q": 1}}),
            1,
        )
        .await;
    let job = w.finished(id).await;
    // Two throttles free, the third uses the only attempt.
    assert_eq!(
        (job.state, job.attempts, job.reschedules),
        (JobState::Dead, 1, 2)
    );
    assert!(job.last_error.unwrap().contains("429"));
    let capacity = w.limiter.get_capacity("api:linear").unwrap();
    assert!(
        capacity.is_reduced(),
        "interactive traffic sees the 429 too: {capacity:?}"
    );
    w.pool.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn bad_targets_are_fatal_with_a_clear_error() {
    let w = world().await;
    let cases = [
        (json!({"api": "nope", "path": "/x"}), "unknown api \"nope\""),
        (
            json!({"api": "slack", "path": "https://evil.example/steal"}),
            "payload.path",
        ),
        (
            json!({"api": "slack", "path": "/a/../../admin"}),
            "payload.path",
        ),
        // The sim has no API called ghost: a 404 is not worth retrying.
        (json!({"api": "ghost", "path": "/x"}), "answered 404"),
    ];
    for (payload, expected) in cases {
        let id = w.enqueue(payload.clone(), 3).await;
        let job = w.finished(id).await;
        assert_eq!((job.state, job.attempts), (JobState::Dead, 1), "{payload}");
        let error = job.last_error.unwrap();
        assert!(error.contains(expected), "{payload}: {error}");
    }
    w.pool.shutdown(Duration::from_secs(5)).await;
}
