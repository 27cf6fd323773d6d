//! The HTTP surface: every route, with its owner.
//!
//! The router is built from [`table`] and nothing else, so no route can
//! exist without a declared [`Owner`]; each handler takes that owner's
//! extractor (see [`crate::layers::auth`]) before it reads its body.

pub mod audit;
pub mod cache;
pub mod catalog;
pub mod dashboard;
mod edge;
pub mod gemini;
pub mod jobs;
pub mod keys;
pub mod limits;
pub mod mcp;
pub mod models;
mod openapi;
pub mod ops;
pub mod proxy;
pub mod requests;
pub mod tenants;
pub mod usage;

use axum::Router;
use axum::http::Method;
use axum::routing::{MethodRouter, any, delete, get, patch, post, put};

use crate::dashboard::LOGIN_PATH;
use crate::error::ApiError;
use crate::layers::auth::Owner;
use crate::state::AppState;

pub use edge::{Edge, EdgeFuture};

/// A route as declared: method (`None`: any), path, owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOwner {
    /// The method, or `None` for every method.
    pub method: Option<Method>,
    /// The path pattern, as axum writes it (`/v1/jobs/{id}`).
    pub path: &'static str,
    /// Who may call it.
    pub owner: Owner,
}

type Entry = (Option<Method>, &'static str, Owner, MethodRouter<AppState>);

/// One entry: `method` is an HTTP method's name, or `ANY`.
fn entry(method: &str, path: &'static str, owner: Owner, h: MethodRouter<AppState>) -> Entry {
    let method =
        (method != "ANY").then(|| Method::from_bytes(method.as_bytes()).expect("a method"));
    (method, path, owner, h)
}

/// Every route: method, path, owner, handler.
#[rustfmt::skip] // a table: one route a line
fn table() -> Vec<Entry> {
    use Owner::{Admin, Anyone, Scraper, Tenant, Viewer};
    vec![
        entry("POST", "/v1/chat/completions", Tenant, post(models::chat)),
        entry("POST", "/v1/embeddings", Tenant, post(models::embeddings)),
        entry("POST", "/v1/responses", Tenant, post(models::responses)),
        entry("POST", "/v1/completions", Tenant, post(models::completions)),
        entry("POST", "/v1/audio/transcriptions", Tenant, post(models::transcriptions)),
        entry("POST", "/v1/images/generations", Tenant, post(models::images)),
        entry("POST", "/v1/moderations", Tenant, post(models::moderations)),
        entry("POST", "/v1/messages", Tenant, post(models::messages)),
        entry("POST", "/v1/messages/count_tokens", Tenant, post(models::count_tokens)),
        entry("GET", "/v1/models", Tenant, get(catalog::list)),
        entry("POST", "/v1beta/models/{*rest}", Tenant, post(gemini::post)),
        entry("POST", "/v1/models/{*rest}", Tenant, post(gemini::post)),
        entry("GET", "/v1/models/{*rest}", Tenant, get(catalog::retrieve)),
        entry("GET", "/v1beta/models", Tenant, get(gemini::list)),
        entry("ANY", "/proxy/{api}/{*path}", Tenant, any(proxy::proxy)),
        entry("ANY", "/mcp", Tenant, any(mcp::mcp)),
        entry("POST", "/v1/limits/acquire", Tenant, post(limits::acquire)),
        entry("POST", "/v1/limits/release", Tenant, post(limits::release)),
        entry("POST", "/v1/limits/report", Tenant, post(limits::report)),
        entry("GET", "/v1/limits", Tenant, get(limits::list)),
        entry("PUT", "/v1/limits/{resource}", Admin, put(limits::set)),
        entry("POST", "/v1/jobs", Tenant, post(jobs::enqueue)),
        entry("GET", "/v1/jobs", Tenant, get(jobs::list)),
        entry("POST", "/v1/jobs/batch", Tenant, post(jobs::enqueue_batch)),
        entry("GET", "/v1/jobs/events", Tenant, get(jobs::events)),
        entry("GET", "/v1/jobs/events/all", Admin, get(jobs::events_all)),
        entry("GET", "/v1/jobs/all", Admin, get(jobs::admin_list)),
        entry("GET", "/v1/jobs/all/{id}", Admin, get(jobs::admin_get)),
        entry("POST", "/v1/jobs/all/{id}/retry", Admin, post(jobs::admin_retry)),
        entry("POST", "/v1/jobs/all/{id}/cancel", Admin, post(jobs::admin_cancel)),
        entry("POST", "/v1/flows", Tenant, post(jobs::enqueue_flow)),
        entry("GET", "/v1/jobs/{id}", Tenant, get(jobs::get_job)),
        entry("POST", "/v1/jobs/{id}/retry", Tenant, post(jobs::retry)),
        entry("POST", "/v1/jobs/{id}/cancel", Tenant, post(jobs::cancel)),
        entry("POST", "/v1/schedules", Tenant, post(jobs::put_schedule)),
        entry("GET", "/v1/schedules", Tenant, get(jobs::list_schedules)),
        entry("GET", "/v1/schedules/{name}", Tenant, get(jobs::get_schedule)),
        entry("DELETE", "/v1/schedules/{name}", Tenant, delete(jobs::delete_schedule)),
        entry("GET", "/v1/queues", Admin, get(jobs::list_queues)),
        entry("POST", "/v1/queues/{queue}/pause", Admin, post(jobs::pause)),
        entry("POST", "/v1/queues/{queue}/resume", Admin, post(jobs::resume)),
        entry("POST", "/v1/queues/{queue}/dead/retry", Admin, post(jobs::dead_retry)),
        entry("DELETE", "/v1/queues/{queue}/dead", Admin, delete(jobs::dead_purge)),
        entry("POST", "/v1/tiers", Admin, post(tenants::create_tier)),
        entry("GET", "/v1/tiers", Admin, get(tenants::list_tiers)),
        entry("PUT", "/v1/tiers/{name}", Admin, put(tenants::update_tier)),
        entry("POST", "/v1/tenants", Admin, post(tenants::create)),
        entry("GET", "/v1/tenants", Admin, get(tenants::list)),
        entry("GET", "/v1/tenants/{name}", Admin, get(tenants::show)),
        entry("PATCH", "/v1/tenants/{name}", Admin, patch(tenants::update)),
        entry("DELETE", "/v1/tenants/{name}", Admin, delete(tenants::delete)),
        entry("POST", "/v1/tenants/{name}/block", Admin, post(tenants::block)),
        entry("POST", "/v1/tenants/{name}/unblock", Admin, post(tenants::unblock)),
        entry("POST", "/v1/keys", Admin, post(keys::issue)),
        entry("GET", "/v1/keys", Admin, get(keys::list)),
        entry("GET", "/v1/keys/{id}", Admin, get(keys::show)),
        entry("PATCH", "/v1/keys/{id}", Admin, patch(keys::update)),
        entry("POST", "/v1/keys/{id}/rotate", Admin, post(keys::rotate)),
        entry("POST", "/v1/keys/{id}/revoke", Admin, post(keys::revoke)),
        entry("DELETE", "/v1/keys/{id}", Admin, delete(keys::delete)),
        entry("POST", "/v1/keys/{id}/block", Admin, post(keys::block)),
        entry("POST", "/v1/keys/{id}/unblock", Admin, post(keys::unblock)),
        entry("DELETE", "/v1/cache", Admin, delete(cache::invalidate)),
        entry("GET", "/v1/cache/stats", Admin, get(cache::stats)),
        entry("GET", "/v1/cache/stats/tenant", Tenant, get(cache::tenant_stats)),
        entry("GET", "/v1/usage", Tenant, get(usage::own)),
        entry("GET", "/v1/usage/all", Admin, get(usage::all)),
        entry("GET", "/v1/requests", Tenant, get(requests::own)),
        entry("GET", "/v1/requests/all", Admin, get(requests::all)),
        entry("GET", "/v1/requests/all/{id}", Admin, get(requests::all_one)),
        entry("GET", "/v1/requests/{id}", Tenant, get(requests::own_one)),
        entry("GET", "/v1/dashboard", Viewer, get(dashboard::snapshot)),
        entry("GET", "/v1/dashboard/history", Viewer, get(dashboard::history)),
        entry("GET", "/v1/dashboard/stream", Viewer, get(dashboard::stream)),
        entry("GET", "/ui", Anyone, get(dashboard::page)),
        entry("GET", "/ui/assets/{file}", Anyone, get(dashboard::asset)),
        entry("GET", "/ui/jobs", Anyone, get(jobs::browser_page)),
        entry("GET", "/ui/jobs/assets/{file}", Anyone, get(jobs::browser_asset)),
        entry("GET", "/ui/requests", Anyone, get(requests::page)),
        entry("GET", "/ui/requests/assets/{file}", Anyone, get(requests::page_asset)),
        entry("POST", LOGIN_PATH, Anyone, post(dashboard::login)),
        entry("POST", "/ui/logout", Anyone, post(dashboard::logout)),
        entry("GET", "/v1/audit", Admin, get(audit::list)),
        entry("GET", "/metrics", Scraper, get(ops::metrics)),
        entry("GET", "/", Anyone, get(ops::root)),
        entry("GET", "/healthz", Anyone, get(ops::healthz)),
        // What load balancers and images often probe by default.
        entry("GET", "/health", Anyone, get(ops::healthz)),
        entry("GET", "/readyz", Anyone, get(ops::readyz)),
        entry("GET", "/openapi.json", Anyone, get(openapi::get)),
    ]
}

/// Every route and its owner, as the router serves them.
pub fn owners() -> Vec<RouteOwner> {
    table()
        .into_iter()
        .map(|(method, path, owner, _)| RouteOwner {
            method,
            path,
            owner,
        })
        .collect()
}

/// The router: [`table`], a JSON 404 and 405, behind its [`Edge`] (the
/// body cap off: bodies are read by the handlers, after the caller is
/// known, see [`crate::body`]; an `x-request-id` on every answer).
pub fn router(state: AppState) -> Edge {
    let mut router = Router::new();
    for (_, path, _, handler) in table() {
        // Routes of one path with several methods merge.
        router = router.route(path, handler);
    }
    let router = router
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            ApiError::MethodNotAllowed("method not allowed on this route".into())
        })
        .with_state(state);
    Edge::new(router)
}
