//! High 1 of issue 33: the limiter API paused or drained what was not the
//! caller's. As found: `POST /v1/limits/acquire` on `jobs:default`, on
//! another tenant's job group, on any `inflight:`/`tokens:` name; and one
//! acquire plus a report of a 429 a minute left another tenant 1 answer
//! in 30 calls.

use serde_json::json;

use crate::{ACME, ADMIN, GLOBEX, MODEL, Target, chat, refusal};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_on_what_is_not_the_callers_are_unknown() {
    let t = Target::start("attack-acquire", "");
    for resource in [
        "jobs:default",
        "jobs:default:globex:default",
        "inflight:anything",
        "tokens:anything",
        "caller:tenant:globex:rpm",
        "session:globex:t1:x",
    ] {
        let res = t
            .post(
                "/v1/limits/acquire",
                Some(ACME),
                &json!({ "resource": resource }),
            )
            .await;
        let (status, e) = refusal(res).await;
        // A session name is always the caller's own: `session:globex:…`
        // names acme's session `globex:…`, never globex's.
        if resource.starts_with("session:") {
            assert_eq!(status, 200, "{resource}: {e}");
        } else {
            assert_eq!(status, 404, "{resource}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenants_429_report_does_not_stop_another_tenant() {
    let t = Target::start("attack-report", "");
    let res = t
        .post("/v1/limits/acquire", Some(ACME), &json!({ "model": MODEL }))
        .await;
    assert_eq!(res.status(), 200);
    let g: serde_json::Value = res.json().await.unwrap();
    let res = t
        .post(
            "/v1/limits/report",
            Some(ACME),
            &json!({"grant_id": g["grant_id"], "status": 429, "retry_after": "60"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let r: serde_json::Value = res.json().await.unwrap();
    assert_eq!(r["applied"], "own", "{r}");
    // The victim: 30 calls, 1 answered. Now every one is.
    let mut answered = 0;
    for _ in 0..30 {
        let res = t
            .post("/v1/chat/completions", Some(GLOBEX), &chat(MODEL))
            .await;
        if res.status() == 200 {
            answered += 1;
        }
    }
    assert_eq!(answered, 30, "globex's calls while acme reported a 429");
    // The report is in the audit trail, as acme's.
    let mut found = false;
    for _ in 0..100 {
        let audit = t.http.get(t.url("/v1/audit?kind=limit.report"));
        let audit = crate::common::read_json("GET audit", audit.bearer_auth(ADMIN)).await;
        if audit["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["actor"] == "tenant:acme"))
        {
            found = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(found, "the report is audited");
}
