//! Every route has a stated owner, and answers only it.
//!
//! Walks the router's own table (`sluice_gateway::routes::owners`, which
//! the router is built from, so no route exists without an owner) and
//! calls each route as nobody, as a tenant, as the operator and as a
//! metrics scraper; checks that `docs/gateway.md` states the same owner
//! for each.

mod common;

use common::{Harness, concrete, raw, sim_config};
use reqwest::Method;
use sluice_gateway::auth::Owner;
use sluice_gateway::config::TenantConfig;
use sluice_gateway::routes::{RouteOwner, owners};

const TENANT: &str = "key-acme";
const ADMIN: &str = "the-operator";
const SCRAPER: &str = "the-scraper";
const VIEWER: &str = "the-viewer";

fn method(r: &RouteOwner) -> Method {
    r.method.clone().unwrap_or(Method::GET)
}

async fn call(h: &Harness, r: &RouteOwner, key: Option<&str>) -> u16 {
    let mut req = h
        .http
        .request(method(r), h.url(&concrete(r.path)))
        .header("content-type", "application/json")
        .body("{}");
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send()
        .await
        .expect("the gateway answers")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_its_owner_only() {
    let h = Harness::with(sim_config(), |c| {
        c.tenants.push(TenantConfig::new("acme", TENANT));
        c.admin_token = Some(ADMIN.into());
        c.metrics.token = Some(SCRAPER.into());
        c.ui.token = Some(VIEWER.into());
    })
    .await;
    let routes = owners();
    assert!(routes.len() >= 20, "{routes:?}");
    let denied = |s: u16| s == 401 || s == 403;
    for r in &routes {
        let what = format!("{} {} ({})", method(r), r.path, r.owner.as_str());
        let nobody = call(&h, r, None).await;
        let tenant = call(&h, r, Some(TENANT)).await;
        let admin = call(&h, r, Some(ADMIN)).await;
        let scraper = call(&h, r, Some(SCRAPER)).await;
        let viewer = call(&h, r, Some(VIEWER)).await;
        match r.owner {
            Owner::Anyone => {
                assert!(!denied(nobody), "{what}: anyone may call it, got {nobody}");
            }
            Owner::Tenant => {
                assert_eq!(nobody, 401, "{what}: anonymous");
                assert!(!denied(tenant), "{what}: the tenant got {tenant}");
                assert_eq!(admin, 401, "{what}: the admin token is no tenant key");
                assert_eq!(scraper, 401, "{what}: the metrics token is no tenant key");
            }
            Owner::Admin => {
                assert_eq!(nobody, 401, "{what}: anonymous");
                assert_eq!(tenant, 403, "{what}: a tenant");
                assert_eq!(scraper, 403, "{what}: the scraper");
                assert_eq!(viewer, 403, "{what}: the dashboard's viewer");
                assert!(!denied(admin), "{what}: the admin got {admin}");
            }
            Owner::Scraper => {
                assert_eq!(nobody, 401, "{what}: anonymous");
                assert_eq!(tenant, 403, "{what}: a tenant");
                assert_eq!(viewer, 403, "{what}: the dashboard's viewer");
                assert!(!denied(scraper), "{what}: the scraper got {scraper}");
                assert!(!denied(admin), "{what}: the admin got {admin}");
            }
            Owner::Viewer => {
                assert_eq!(nobody, 401, "{what}: anonymous");
                assert_eq!(tenant, 403, "{what}: a tenant");
                assert_eq!(scraper, 403, "{what}: the scraper");
                assert!(!denied(viewer), "{what}: the viewer got {viewer}");
                assert!(!denied(admin), "{what}: the admin got {admin}");
            }
        }
    }
    // Nothing answers outside the table.
    let (status, _) = raw(h.addr, "GET", "/v1/secret-admin", &[]).await;
    assert_eq!(status, 404);
    h.stop().await;
}

/// `docs/gateway.md` has one row per route, stating its owner.
#[test]
fn the_docs_state_every_routes_owner() {
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/gateway.md"
    ))
    .expect("docs/gateway.md");
    for r in owners() {
        let m = r.method.as_ref().map_or("ANY", |m| m.as_str());
        let cell = format!("| `{m} {}` | {} |", r.path, r.owner.as_str());
        assert!(
            docs.lines().any(|l| l.starts_with(&cell)),
            "docs/gateway.md has no row starting {cell}"
        );
    }
}
