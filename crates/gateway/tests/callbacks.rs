//! Completion webhooks: a job with a `callback_url` runs against the
//! sim's Slack, then its callback is posted to a real HTTP server on
//! 127.0.0.1, signed with HMAC-SHA256; the receiver's first answer is a
//! 500, so the callback is retried as a job of its own, with the same
//! delivery id. URLs outside `[jobs.callbacks] allow`, a callback in a
//! batch, and the `callback` kind named directly are refused with a 400
//! naming the field.

mod common;

use axum::http::{HeaderMap, StatusCode};
use common::{ACME, Harness, expect_error, sim_config, slack_job, two_tenants, wait_for};
use serde_json::{Value, json};
use sluice_jobs_http::callback::{DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, hmac_sha256};
use std::sync::{Arc, Mutex};

const SECRET_VAR: &str = "SLUICE_TEST_CALLBACK_SECRET";
const SECRET: &str = "callback-secret";

/// What the receiver got: headers and body of each request, in order.
type Seen = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

/// A receiver on 127.0.0.1 answering 500 to the first request and 200
/// to the others; its port.
async fn receiver(seen: Seen) -> u16 {
    let app = axum::Router::new().route(
        "/hooks/{*rest}",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                let mut got = seen.lock().unwrap();
                got.push((headers, body.to_vec()));
                if got.len() == 1 {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_is_signed_retried_and_delivered_once_answered() {
    let seen: Seen = Arc::default();
    let port = receiver(seen.clone()).await;
    let h = Harness::with(sim_config(), |c| {
        two_tenants(c);
        c.jobs.callbacks.allow = vec![format!("http://127.0.0.1:{port}/hooks/")];
        c.jobs.callbacks.secret_env = Some(SECRET_VAR.into());
        c.secrets.insert(SECRET_VAR, SECRET);
    })
    .await;
    let send = |body: Value, path: &'static str| h.post(path, &body).bearer_auth(ACME).send();

    // Refused: a URL outside the allow-list, another port, a batch, the
    // kind itself.
    for url in [
        format!("http://127.0.0.1:{port}/elsewhere"),
        format!("http://127.0.0.1:{}/hooks/x", port.wrapping_add(1)),
        "http://169.254.169.254/latest/meta-data".to_owned(),
    ] {
        let mut job = slack_job("hello");
        job["callback_url"] = url.into();
        let e = expect_error(send(job, "/v1/jobs").await.unwrap(), 400, "invalid_request").await;
        assert_eq!(e["param"], "callback_url", "{e}");
    }
    let mut job = slack_job("hello");
    job["callback_url"] = format!("http://127.0.0.1:{port}/hooks/a").into();
    let e = expect_error(
        send(json!({"jobs": [job]}), "/v1/jobs/batch")
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(e["param"], "jobs[0].callback_url", "{e}");
    let direct = json!({"queue": "default", "kind": "callback", "payload": {"url": format!("http://127.0.0.1:{port}/hooks/a")}});
    let e = expect_error(
        send(direct, "/v1/jobs").await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
    assert_eq!(e["param"], "kind", "{e}");
    assert!(seen.lock().unwrap().is_empty(), "nothing was called back");

    // Accepted: the job, with its callback as its parent.
    let mut job = slack_job("hello");
    job["callback_url"] = format!("http://127.0.0.1:{port}/hooks/acme?x=1").into();
    let keyed = |job: &Value| {
        h.post("/v1/jobs", job)
            .bearer_auth(ACME)
            .header("idempotency-key", "order-17")
            .send()
    };
    let res = keyed(&job).await.unwrap();
    assert_eq!(res.status(), 201);
    let stored: Value = res.json().await.unwrap();
    let id = stored["id"].as_i64().unwrap();
    let callback = stored["parent"].as_i64().expect("the callback job");
    assert_eq!(stored["kind"], "http");
    // A replay answers the same job, and stores no second callback.
    let res = keyed(&job).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(common::header(&res, "x-sluice-idempotent-replay"), "true");
    let again: Value = res.json().await.unwrap();
    assert_eq!(
        (again["id"].as_i64(), again["parent"].as_i64()),
        (Some(id), Some(callback))
    );

    // Delivered on the second try, once the receiver answers 200.
    let done = wait_for("the callback completes", || async {
        let c = h.get_json(&format!("/v1/jobs/{callback}"), ACME).await;
        (c["state"] == "completed").then_some(c)
    })
    .await;
    assert_eq!(done["attempts"], 2, "{done}");
    assert_eq!(done["kind"], "callback");
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one failed delivery, one answered");
    let header = |h: &HeaderMap, name: &str| h[name].to_str().unwrap().to_owned();
    for (headers, body) in &got {
        assert_eq!(header(headers, DELIVERY_HEADER), callback.to_string());
        assert_eq!(header(headers, EVENT_HEADER), "completed");
        // The signature: t=<seconds>,v1=<hex HMAC(secret, "<t>.<body>")>.
        let sig = header(headers, SIGNATURE_HEADER);
        let (t, v1) = sig
            .strip_prefix("t=")
            .and_then(|s| s.split_once(",v1="))
            .unwrap_or_else(|| panic!("signature {sig}"));
        let mut signed = format!("{t}.").into_bytes();
        signed.extend_from_slice(body);
        assert_eq!(v1, hex(&hmac_sha256(SECRET.as_bytes(), &signed)));
        let wrong = hmac_sha256(b"another secret", &signed);
        assert_ne!(v1, hex(&wrong));
        let payload: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(payload["event"], "completed");
        assert_eq!(payload["job"]["id"], id);
        assert_eq!(payload["job"]["tenant"], "acme");
        assert!(payload["job"]["result"].is_object(), "{payload}");
    }
    // The job itself completed once.
    let job = h.get_json(&format!("/v1/jobs/{id}"), ACME).await;
    assert_eq!(
        (job["state"].as_str(), job["attempts"].as_u64()),
        (Some("completed"), Some(1))
    );
    h.stop().await;
}
