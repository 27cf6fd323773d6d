//! A simulated Discord REST API under `/discord/api/v10/…`: the seven
//! operations of the seed's synthesis engine, Discord's global limit and
//! per-route buckets with their `X-RateLimit-*` headers, and a log of
//! every effect (`GET /_sim/discord/effects`).
//!
//! | operation | route | answer |
//! |---|---|---|
//! | create_role | `POST /guilds/{g}/roles` | 200, the role |
//! | delete_role | `DELETE /guilds/{g}/roles/{r}` | 204 |
//! | assign_role | `PUT /guilds/{g}/members/{u}/roles/{r}` | 204 |
//! | remove_role | `DELETE /guilds/{g}/members/{u}/roles/{r}` | 204 |
//! | create_channel | `POST /guilds/{g}/channels` | 201, the channel |
//! | delete_channel | `DELETE /channels/{c}` | 200, the channel |
//! | update_permissions | `PUT /channels/{c}/permissions/{o}` | 204 |
//!
//! Limits ([`DiscordLimits`]): a global bucket (50/s) answered with 429,
//! `X-RateLimit-Global: true`, `X-RateLimit-Scope: global` and a JSON
//! `retry_after` (seconds) with `"global": true`; and per route bucket
//! and major id (guild or channel) a fixed window (5 per 2 s), sent on
//! every answer as `X-RateLimit-Limit`, `-Remaining`, `-Reset`,
//! `-Reset-After` and `-Bucket`.

mod effects;
mod limits;

pub use effects::{DiscordEffect, DiscordReport};
pub use limits::DiscordLimits;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::state::Shared;
use crate::wire::headers::put;
use effects::Effects;
use limits::{Limiter, RouteView};

/// The path prefix the simulated API is served under.
pub const PREFIX: &str = "/discord/api/v10";

/// The simulated Discord's state.
#[derive(Debug)]
pub(crate) struct Discord {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    limiter: Limiter,
    effects: Effects,
    requests: u64,
    global_429: u64,
    route_429: u64,
    next_id: u64,
}

impl Default for Discord {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                limiter: Limiter::new(DiscordLimits::default(), Instant::now()),
                effects: Effects::default(),
                requests: 0,
                global_429: 0,
                route_429: 0,
                next_id: 1_100_000_000_000_000_000,
            }),
        }
    }
}

impl Discord {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The effects and counters.
    pub(crate) fn report(&self) -> DiscordReport {
        let inner = self.lock();
        DiscordReport {
            effects: inner.effects.all(),
            dropped: inner.effects.dropped,
            requests: inner.requests,
            global_429: inner.global_429,
            route_429: inner.route_429,
        }
    }

    /// Replaces the limits; buckets start full.
    pub(crate) fn set_limits(&self, limits: DiscordLimits) {
        self.lock().limiter = Limiter::new(limits, Instant::now());
    }

    /// Forgets effects and counters.
    pub(crate) fn reset(&self) {
        let mut inner = self.lock();
        inner.effects.clear();
        inner.requests = 0;
        inner.global_429 = 0;
        inner.route_429 = 0;
    }
}

/// One of the seven operations, matched from a method and path.
struct Route {
    op: &'static str,
    /// The route with ids other than the major one as `:id`.
    template: String,
    major: String,
    status: StatusCode,
    creates: bool,
}

fn route(method: &Method, path: &str) -> Option<Route> {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let id = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    let r = |op, template: String, major: &str, status, creates| Route {
        op,
        template,
        major: major.to_owned(),
        status,
        creates,
    };
    match (method.as_str(), segs.as_slice()) {
        ("POST", ["guilds", g, "roles"]) if id(g) => Some(r(
            "create_role",
            "POST /guilds/{}/roles".into(),
            g,
            StatusCode::OK,
            true,
        )),
        ("DELETE", ["guilds", g, "roles", x]) if id(g) && id(x) => Some(r(
            "delete_role",
            "DELETE /guilds/{}/roles/:id".into(),
            g,
            StatusCode::NO_CONTENT,
            false,
        )),
        (m @ ("PUT" | "DELETE"), ["guilds", g, "members", u, "roles", x])
            if id(g) && id(u) && id(x) =>
        {
            let op = if m == "PUT" {
                "assign_role"
            } else {
                "remove_role"
            };
            Some(r(
                op,
                format!("{m} /guilds/{{}}/members/:id/roles/:id"),
                g,
                StatusCode::NO_CONTENT,
                false,
            ))
        }
        ("POST", ["guilds", g, "channels"]) if id(g) => Some(r(
            "create_channel",
            "POST /guilds/{}/channels".into(),
            g,
            StatusCode::CREATED,
            true,
        )),
        ("DELETE", ["channels", c]) if id(c) => Some(r(
            "delete_channel",
            "DELETE /channels/{}".into(),
            c,
            StatusCode::OK,
            false,
        )),
        ("PUT", ["channels", c, "permissions", o]) if id(c) && id(o) => Some(r(
            "update_permissions",
            "PUT /channels/{}/permissions/:id".into(),
            c,
            StatusCode::NO_CONTENT,
            false,
        )),
        _ => None,
    }
}

/// A short, stable bucket name for a route template.
fn bucket_hash(template: &str) -> String {
    // FNV-1a: stable across runs, unlike std's randomized hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in template.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// `ANY /discord/api/v10/…`.
pub(crate) async fn serve(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().strip_prefix(PREFIX).unwrap_or("").to_owned();
    let discord = &shared.discord;
    let now = Instant::now();
    let mut inner = discord.lock();
    inner.requests += 1;
    let Some(route) = route(&method, &path) else {
        drop(inner);
        return error(StatusCode::NOT_FOUND, "404: Not Found", 0);
    };
    if let Err(wait) = inner.limiter.global(now) {
        inner.global_429 += 1;
        drop(inner);
        let mut r = limited(wait, true);
        put(r.headers_mut(), "x-ratelimit-global", "true".into());
        put(r.headers_mut(), "x-ratelimit-scope", "global".into());
        return r;
    }
    let hash = bucket_hash(&route.template);
    let key = format!("{hash}:{}", route.major);
    let view = match inner.limiter.route(&key, now) {
        Ok(view) => view,
        Err(view) => {
            inner.route_429 += 1;
            drop(inner);
            let mut r = limited(view.reset_after, false);
            put(r.headers_mut(), "x-ratelimit-scope", "user".into());
            bucket_headers(r.headers_mut(), &view, &hash);
            return r;
        }
    };
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => {
                drop(inner);
                let mut r = error(
                    StatusCode::BAD_REQUEST,
                    "400: Bad Request: invalid JSON",
                    50109,
                );
                bucket_headers(r.headers_mut(), &view, &hash);
                return r;
            }
        }
    };
    if route.creates && body.get("name").and_then(Value::as_str).is_none() {
        drop(inner);
        let mut r = error(
            StatusCode::BAD_REQUEST,
            "Invalid Form Body: name is required",
            50035,
        );
        bucket_headers(r.headers_mut(), &view, &hash);
        return r;
    }
    let created = route.creates.then(|| {
        inner.next_id += 1;
        inner.next_id.to_string()
    });
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    inner.effects.push(DiscordEffect {
        seq: 0,
        op: route.op.to_owned(),
        method: method.as_str().to_owned(),
        path: path.clone(),
        job: header("x-sluice-job-id"),
        reason: header("x-audit-log-reason"),
        body: body.clone(),
        created: created.clone(),
    });
    drop(inner);
    let mut r = match (&created, route.op) {
        (Some(id), _) => {
            let mut object = body;
            object["id"] = json!(id);
            object["guild_id"] = json!(route.major);
            (route.status, Json(object)).into_response()
        }
        (None, "delete_channel") => {
            (route.status, Json(json!({"id": route.major}))).into_response()
        }
        (None, _) => route.status.into_response(),
    };
    bucket_headers(r.headers_mut(), &view, &hash);
    r
}

/// A 429 as Discord sends it.
fn limited(wait: Duration, global: bool) -> Response {
    let secs = (wait.as_secs_f64() * 1000.0).ceil() / 1000.0;
    let body = json!({
        "message": "You are being rate limited.",
        "retry_after": secs,
        "global": global,
    });
    let mut r = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    put(r.headers_mut(), "retry-after", whole.to_string());
    r
}

fn bucket_headers(headers: &mut HeaderMap, view: &RouteView, hash: &str) {
    // Rounded up, so that a client waiting this long is never early.
    let after = (view.reset_after.as_secs_f64() * 1000.0).ceil() / 1000.0;
    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        + after;
    put(headers, "x-ratelimit-limit", view.limit.to_string());
    put(headers, "x-ratelimit-remaining", view.remaining.to_string());
    put(headers, "x-ratelimit-reset", format!("{epoch:.3}"));
    put(headers, "x-ratelimit-reset-after", format!("{after:.3}"));
    put(headers, "x-ratelimit-bucket", hash.to_owned());
}

fn error(status: StatusCode, message: &str, code: u32) -> Response {
    (status, Json(json!({"message": message, "code": code}))).into_response()
}

/// `GET /_sim/discord/effects`.
pub(crate) async fn effects(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.discord.report()).into_response()
}
