//! The job browser (`/ui/jobs`) in the same browser: the operator opens
//! it with the admin token, finds a dead job of one tenant among two
//! tenants' jobs, reads its payload and timeline, and retries it from the
//! page; the API then shows it waiting again, the other tenant's job
//! untouched, and the audit trail the admin's retry.

use std::time::Duration;

use serde_json::{Value, json};
use sluice_jobs::{JobStore, RetryDecision, SqliteStore, StoreConfig};

use super::{Driver, VIEWER, browser, tempdir};
use crate::common::{ACME, GLOBEX, Harness, sim_config, slack_job, two_tenants, wait_for};

const OPERATOR: &str = "the-operator";

async fn enqueue(h: &Harness, key: &str) -> i64 {
    let res = h
        .post("/v1/jobs", &slack_job("from the browser test"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["id"].as_i64().unwrap()
}

/// Fails every due job of `default` for good through the gateway's own
/// SQLite file, as a worker meeting a 4xx would (the gateway runs none).
async fn kill_all(h: &Harness) -> usize {
    let store = SqliteStore::open(h.data_dir.join("jobs.db"), StoreConfig::default())
        .await
        .expect("the gateway's jobs.db opens");
    let jobs = store
        .claim("default", "test-worker", 100, Duration::from_secs(60))
        .await
        .expect("claim");
    for job in &jobs {
        let lease = job.lease.as_ref().expect("a claimed job is leased");
        store
            .fail(lease, "400 from upstream", RetryDecision::Dead)
            .await
            .expect("fail");
    }
    store.close().await;
    jobs.len()
}

async fn click(d: &Driver, css: &str) {
    let el = d.element(css).await;
    d.session("POST", &format!("/element/{el}/click"), Some(json!({})))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_retries_a_dead_job_from_the_page() {
    let (driver, chromium) = match browser() {
        Ok(found) => found,
        Err(why) if std::env::var_os("SLUICE_TEST_REQUIRE_BROWSER").is_none() => {
            eprintln!("skipped: {why} (SLUICE_TEST_REQUIRE_BROWSER is unset)");
            return;
        }
        Err(why) => panic!("{why}, and SLUICE_TEST_REQUIRE_BROWSER is set"),
    };
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.jobs.workers = false;
        c.admin_token = Some(OPERATOR.into());
        c.ui.token = Some(VIEWER.into());
    })
    .await;
    let mine = enqueue(&h, ACME).await;
    let theirs = enqueue(&h, GLOBEX).await;
    assert_eq!(kill_all(&h).await, 2);

    let profile = tempdir();
    let d = Driver::start(&driver, &chromium, &profile).await;
    d.go(&h.url("/ui/jobs")).await;
    // The dashboard's viewer token is not enough: the page says why.
    let token = d.element("#token").await;
    d.session(
        "POST",
        &format!("/element/{token}/value"),
        Some(json!({"text": VIEWER})),
    )
    .await;
    click(&d, "#login-form button[type=submit]").await;
    d.until(
        "the viewer token is refused",
        "const e = document.getElementById('login-error'); return e.textContent.includes('admin token') ? e.textContent : null;",
    )
    .await;
    let token = d.element("#token").await;
    d.session(
        "POST",
        &format!("/element/{token}/value"),
        Some(json!({"text": OPERATOR})),
    )
    .await;
    click(&d, "#login-form button[type=submit]").await;
    // The queue with its two dead jobs.
    d.until(
        "the queue shows two dead jobs",
        "const c = document.querySelector('#queues tr[data-queue=\"default\"] td[data-state=\"dead\"]'); return c && c.textContent === '2' ? true : null;",
    )
    .await;
    // Both tenants' jobs are listed; the operator opens acme's.
    d.until(
        "both jobs are listed",
        &format!("return document.querySelector('#jobs tr[data-job=\"{mine}\"]') && document.querySelector('#jobs tr[data-job=\"{theirs}\"]') ? true : null;"),
    )
    .await;
    click(&d, &format!("#jobs tr[data-job=\"{mine}\"]")).await;
    let timeline = d
        .until(
            "the job's timeline shows its death",
            &format!("const j = document.getElementById('job'); if (j.hidden || j.dataset.job !== '{mine}') return null; const ev = Array.from(document.querySelectorAll('#timeline tbody tr')).map(r => r.dataset.event); return ev.includes('dead') ? ev : null;"),
        )
        .await;
    assert_eq!(timeline, json!(["enqueued", "active", "dead"]));
    let payload = d
        .script("return document.getElementById('job-payload').textContent")
        .await;
    assert!(
        payload.as_str().unwrap().contains("from the browser test"),
        "{payload}"
    );
    let error = d
        .script("const r = document.querySelector('#job-fields tr[data-field=\"last error\"]'); return r ? r.textContent : null;")
        .await;
    assert!(
        error.as_str().unwrap().contains("400 from upstream"),
        "{error}"
    );
    click(&d, "#job-retry").await;
    d.until(
        "the page shows the job waiting again",
        "const j = document.getElementById('job'); return j.dataset.state === 'available' ? true : null;",
    )
    .await;

    // The API agrees; the other tenant's dead job is untouched.
    let job = h.get_json(&format!("/v1/jobs/{mine}"), ACME).await;
    assert_eq!(
        (job["state"].as_str(), job["attempts"].as_u64()),
        (Some("available"), Some(0))
    );
    let other = h.get_json(&format!("/v1/jobs/{theirs}"), GLOBEX).await;
    assert_eq!(other["state"], "dead");
    // The retry is the admin's in the audit trail.
    let target = mine.to_string();
    let entry = wait_for("the retry is audited", || async {
        let trail = h.get_json("/v1/audit?kind=job.retry", OPERATOR).await;
        trail["entries"].as_array().and_then(|e| {
            e.iter()
                .find(|e| e["target"].as_str() == Some(target.as_str()))
                .cloned()
        })
    })
    .await;
    assert_eq!(entry["actor"], "admin", "{entry}");
    assert_eq!(entry["before"]["state"], "dead", "{entry}");
    assert_eq!(entry["after"]["state"], "available", "{entry}");

    d.session("DELETE", "", None).await;
    drop(d);
    let _ = std::fs::remove_dir_all(&profile);
    h.stop().await;
}
