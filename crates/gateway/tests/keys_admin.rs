//! The admin API of tenants, keys and tiers kept in the key store
//! (`{data_dir}/keys.db` here): what it accepts, what it refuses (naming
//! the field), and that secrets are shown once.

mod common;

use common::{Harness, sim_config};
use reqwest::StatusCode;
use serde_json::{Value, json};

const ADMIN: &str = "the-operator";

async fn admin() -> Harness {
    Harness::with(sim_config(), |c| c.admin_token = Some(ADMIN.into())).await
}

/// `method path` with `body` as the operator: (status, JSON answer).
async fn call(h: &Harness, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = h.http.request(method, h.url(path)).bearer_auth(ADMIN);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.expect("the gateway answers");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn param(body: &Value) -> &str {
    body["error"]["param"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_keys_and_tiers_through_the_admin_api() {
    let h = admin().await;
    // Tiers.
    let (s, b) = call(
        &h,
        "POST",
        "/v1/tiers",
        Some(json!({"name": "free", "limits": {"requests_per_minute": 60}})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = call(&h, "POST", "/v1/tiers", Some(json!({"name": "free"}))).await;
    assert_eq!(s, 409, "{b}");
    let (s, b) = call(
        &h,
        "POST",
        "/v1/tiers",
        Some(json!({"name": "pro", "limits": {"requests_per_second": -1}})),
    )
    .await;
    assert_eq!((s, param(&b)), (400, "limits.requests_per_second"), "{b}");
    let (s, b) = call(
        &h,
        "POST",
        "/v1/tiers",
        Some(json!({"name": "pro", "limits": {"rpm": 1}})),
    )
    .await;
    assert_eq!((s, param(&b)), (400, "limits.rpm"), "{b}");
    let (s, b) = call(
        &h,
        "PUT",
        "/v1/tiers/free",
        Some(json!({"limits": {"requests_per_minute": 30}})),
    )
    .await;
    assert_eq!(
        (s, &b["limits"]["requests_per_minute"]),
        (200, &json!(30)),
        "{b}"
    );
    let (s, _) = call(&h, "PUT", "/v1/tiers/gold", Some(json!({"limits": {}}))).await;
    assert_eq!(s, 404);

    // Tenants.
    let (s, b) = call(
        &h,
        "POST",
        "/v1/tenants",
        Some(json!({"name": "acme", "tier": "gold"})),
    )
    .await;
    assert_eq!((s, param(&b)), (400, "tier"), "{b}");
    let (s, b) = call(
        &h,
        "POST",
        "/v1/tenants",
        Some(json!({"name": "acme", "tier": "free", "tags": ["team-a"]})),
    )
    .await;
    assert_eq!((s, b["state"].as_str()), (201, Some("active")), "{b}");
    let (s, b) = call(&h, "POST", "/v1/tenants", Some(json!({"name": "bad name"}))).await;
    assert_eq!((s, param(&b)), (400, "name"), "{b}");
    let (s, b) = call(
        &h,
        "PATCH",
        "/v1/tenants/acme",
        Some(json!({"tier": null, "limits": {"max_concurrent": 2}})),
    )
    .await;
    assert_eq!(
        (s, &b["tier"], &b["limits"]["max_concurrent"]),
        (200, &Value::Null, &json!(2)),
        "{b}"
    );
    let (s, b) = call(&h, "POST", "/v1/tenants/acme/block", None).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("blocked")), "{b}");
    let (s, b) = call(&h, "POST", "/v1/tenants/acme/unblock", None).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("active")), "{b}");
    let (s, b) = call(&h, "GET", "/v1/tenants", None).await;
    assert_eq!(
        (s, b["tenants"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{b}"
    );
    let (s, _) = call(&h, "GET", "/v1/tenants/nobody", None).await;
    assert_eq!(s, 404);

    // Keys: the secret is in the answer to the issue, and nowhere after.
    let (s, b) = call(&h, "POST", "/v1/keys", Some(json!({"tenant": "nobody"}))).await;
    assert_eq!(s, 404, "{b}");
    let (s, b) = call(
        &h,
        "POST",
        "/v1/keys",
        Some(json!({"tenant": "acme", "name": "ci", "limits": {"models": ["openai/*"]}})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let key = b["key"].as_str().unwrap().to_owned();
    let id = b["id"].as_str().unwrap().to_owned();
    assert!(key.starts_with(&format!("sk-sluice-{id}_")), "{key}");
    let secret = key.rsplit('_').next().unwrap().to_owned();
    let (s, b) = call(&h, "GET", "/v1/keys?tenant=acme", None).await;
    assert_eq!(s, 200);
    assert_eq!(b["keys"][0]["id"], id.as_str());
    assert!(!b.to_string().contains(&secret), "{b}");
    let (s, b) = call(&h, "GET", &format!("/v1/keys/{id}"), None).await;
    assert_eq!((s, b["name"].as_str()), (200, Some("ci")), "{b}");
    assert!(!b.to_string().contains(&secret));
    let (s, b) = call(&h, "GET", "/v1/keys?tennant=acme", None).await;
    assert_eq!((s, param(&b)), (400, "tennant"), "{b}");
    let db = std::fs::read(h.data_dir.join("keys.db")).unwrap_or_default();
    let wal = std::fs::read(h.data_dir.join("keys.db-wal")).unwrap_or_default();
    for bytes in [db, wal] {
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()));
    }

    // Rotate, then revoke and block.
    let (s, b) = call(
        &h,
        "POST",
        &format!("/v1/keys/{id}/rotate"),
        Some(json!({"grace_seconds": 99999999})),
    )
    .await;
    assert_eq!((s, param(&b)), (400, "grace_seconds"), "{b}");
    let (s, b) = call(
        &h,
        "POST",
        &format!("/v1/keys/{id}/rotate"),
        Some(json!({"grace_seconds": 60})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    let new_id = b["id"].as_str().unwrap().to_owned();
    assert_eq!(b["previous"]["state"], "rotated");
    assert_eq!(b["previous"]["replaced_by"], new_id.as_str());
    assert!(
        b["key"]
            .as_str()
            .unwrap()
            .starts_with(&format!("sk-sluice-{new_id}_"))
    );
    let (s, b) = call(&h, "POST", &format!("/v1/keys/{id}/rotate"), None).await;
    assert_eq!(s, 409, "{b}");
    let (s, b) = call(&h, "POST", &format!("/v1/keys/{new_id}/block"), None).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("blocked")), "{b}");
    let (s, b) = call(&h, "POST", &format!("/v1/keys/{new_id}/revoke"), None).await;
    assert_eq!((s, b["state"].as_str()), (200, Some("revoked")), "{b}");
    let (s, b) = call(&h, "POST", &format!("/v1/keys/{new_id}/unblock"), None).await;
    assert_eq!(s, 409, "{b}");
    let (s, _) = call(&h, "POST", "/v1/keys/0123456789ab/revoke", None).await;
    assert_eq!(s, 404);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_api_is_the_operators() {
    let h = admin().await;
    let res = h
        .http
        .post(h.url("/v1/tenants"))
        .json(&json!({"name": "acme"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    let res = h
        .http
        .post(h.url("/v1/tenants"))
        .bearer_auth("not-the-operator")
        .json(&json!({"name": "acme"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    h.stop().await;

    // Switched off: the routes say so.
    let h = Harness::with(sim_config(), |c| {
        c.admin_token = Some(ADMIN.into());
        c.keys.enabled = false;
    })
    .await;
    let (s, b) = call(&h, "GET", "/v1/keys", None).await;
    assert_eq!(s, 404);
    assert!(
        b["error"]["message"]
            .as_str()
            .unwrap()
            .contains("[keys] enabled"),
        "{b}"
    );
    assert!(!h.data_dir.join("keys.db").exists());
    h.stop().await;
}
