//! High 6 of issue 33: a replica that started without tenants stayed open
//! after tenants were created through another replica sharing its key
//! store (no Redis): anonymous callers named any workspace.

use serde_json::json;

use crate::common::Serve;
use crate::{ADMIN, MODEL, Target, chat};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_started_open_closes_when_another_makes_a_tenant() {
    let a = Target::start_with("attack-open", "[jobs]\nworkers = false\n", false);
    // A second replica on the same data directory: the same keys.db.
    let b = Serve::start(&a.dir.join("sluice.toml"));
    let anonymous = |url: String| {
        let http = a.http.clone();
        async move {
            http.post(format!("{url}/v1/chat/completions"))
                .json(&chat(MODEL))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(anonymous(b.url.clone()).await, 200, "open at start");
    let res = a
        .http
        .post(a.url("/v1/tenants"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "acme"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    assert_eq!(anonymous(a.gateway.url.clone()).await, 401, "a: at once");
    // b has no bus to hear it on: it reads the store (every 2 s).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = anonymous(b.url.clone()).await;
        if status == 401 {
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "b still answers anonymous callers ({status})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
