//! The live dashboard: the page (`/ui`, its assets, login and logout)
//! and its data (`GET /v1/dashboard`, `/history`, `/stream`).
//!
//! The page and its assets hold no data and are anyone's; the data is a
//! [`Viewer`]'s. A browser logs in by posting a token to `/ui/login`,
//! which answers with an `HttpOnly; SameSite=Strict` session cookie: the
//! token never appears in a URL, and page script never holds it.

use axum::Json;
use axum::body::Bytes;
use std::net::SocketAddr;

use axum::Extension;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::audit::Act;
use crate::body::{SmallBody, json};
use crate::dashboard::logins::{MAX_FAILURES, WINDOW};
use crate::dashboard::sessions::{COOKIE_NAME, SESSION_TTL};
use crate::dashboard::{INTERVAL, LOGIN_PATH, sse_event};
use crate::error::ApiError;
use crate::layers::auth::{Anyone, Viewer};
use crate::state::AppState;

const PAGE: &str = include_str!("../../assets/ui/index.html");
const SCRIPT: &str = include_str!("../../assets/ui/app.js");
const STYLE: &str = include_str!("../../assets/ui/app.css");

/// Only the page's own files, no inline script, no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; \
    base-uri 'none'";

pub(crate) fn enabled(state: &AppState) -> Result<(), ApiError> {
    if state.config.ui.enabled {
        Ok(())
    } else {
        Err(ApiError::NotFound(
            "the dashboard is off (ui.enabled = false)".into(),
        ))
    }
}

pub(crate) fn file(
    state: &AppState,
    content_type: &'static str,
    body: &'static str,
) -> Result<Response, ApiError> {
    enabled(state)?;
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response())
}

/// A page's content type.
pub(crate) const HTML: &str = "text/html; charset=utf-8";

/// A page's script and style, by the name its HTML asks for them: the
/// dashboard's, the job browser's and the request log's (embedded in the
/// binary).
pub(crate) fn script_or_style(
    state: &AppState,
    name: &str,
    (script_name, script): (&str, &'static str),
    (style_name, style): (&str, &'static str),
) -> Result<Response, ApiError> {
    if name == script_name {
        file(state, "text/javascript; charset=utf-8", script)
    } else if name == style_name {
        file(state, "text/css; charset=utf-8", style)
    } else {
        Err(ApiError::NotFound(format!("no asset {name:?}")))
    }
}

/// `GET /ui`: the page.
pub async fn page(State(state): State<AppState>, _: Anyone) -> Result<Response, ApiError> {
    file(&state, HTML, PAGE)
}

/// `GET /ui/assets/{file}`: the page's script and style.
pub async fn asset(
    State(state): State<AppState>,
    _: Anyone,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    script_or_style(&state, &name, ("app.js", SCRIPT), ("app.css", STYLE))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    token: String,
}

/// `POST /ui/login` with `{"token": …}` (the dashboard's or the admin's):
/// a session cookie. A wrong token is recorded in the audit trail
/// (`ui.login_failed`, by `address:{ip}`) and counted against the
/// client's address: past [`MAX_FAILURES`] a minute it gets 429 with
/// `Retry-After` and no token is checked until then.
pub async fn login(
    State(state): State<AppState>,
    _: Anyone,
    act: Act,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> (Act, Result<Response, ApiError>) {
    let address = peer.map(|Extension(ConnectInfo(a))| a.ip());
    let opened = open_session(&state, &act, address, &headers, &body).map(|id| {
        let cookie = format!(
            "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
            SESSION_TTL.as_secs(),
            secure(&headers)
        );
        (
            [(header::SET_COOKIE, cookie)],
            Json(json!({"logged_in": true, "expires_in_s": SESSION_TTL.as_secs()})),
        )
            .into_response()
    });
    // A failed login is recorded: its answer carries the act's id too.
    (act, opened)
}

/// A new session for the token in `body`, sent from `address` (see
/// [`login`]).
fn open_session(
    state: &AppState,
    act: &Act,
    address: Option<std::net::IpAddr>,
    headers: &HeaderMap,
    body: &bytes::Bytes,
) -> Result<String, ApiError> {
    enabled(state)?;
    same_site(headers)?;
    if let Some(wait) = address.and_then(|a| state.observers.board.logins.check(a).err()) {
        return Err(ApiError::RateLimited {
            resource: "dashboard logins from this address".into(),
            retry_after: Some(wait),
            policy: Some((u64::from(MAX_FAILURES), WINDOW)),
        });
    }
    let b: LoginBody = json(body)?;
    if !state.stores.keys.dashboard_enabled() {
        return Err(ApiError::Forbidden(
            "the dashboard needs a token: set ui.token_env (read-only) or admin_token".into(),
        ));
    }
    if !state.stores.keys.is_viewer(b.token.as_bytes()) {
        let who = address.map_or_else(|| "unknown".to_owned(), |a| a.to_string());
        if let Some(a) = address {
            state.observers.board.logins.failed(a);
        }
        state.observers.record(
            act.entry(&format!("address:{who}"), "ui.login_failed", LOGIN_PATH)
                .after(json!({"reason": "wrong dashboard token"})),
        );
        return Err(ApiError::Unauthorized(
            "`token`: wrong dashboard token".into(),
        ));
    }
    state
        .observers
        .board
        .sessions
        .open()
        .ok_or_else(|| ApiError::Unavailable {
            message: "no random source for a session id".into(),
            retry_after: None,
        })
}

/// `POST /ui/logout`: ends the browser's session.
pub async fn logout(
    State(state): State<AppState>,
    _: Anyone,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    same_site(&headers)?;
    state.observers.board.sessions.close(&headers);
    let gone = format!(
        "{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        secure(&headers)
    );
    Ok((
        [(header::SET_COOKIE, gone)],
        Json(json!({"logged_in": false})),
    )
        .into_response())
}

/// Refuses a login or logout sent from another site: a browser says where
/// a request comes from in `Sec-Fetch-Site` and `Origin`, and a page of
/// another site must not log a browser in (to a session the attacker
/// chose) or out. A client that is not a browser sends neither.
///
/// # Errors
/// 403 naming the header.
fn same_site(headers: &HeaderMap) -> Result<(), ApiError> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = get("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return Err(ApiError::Forbidden(format!(
            "header `sec-fetch-site`: {site:?}: log in from the dashboard's own page"
        )));
    }
    if let Some(origin) = get("origin") {
        let host = get("host").unwrap_or("");
        let origin_host = origin
            .split_once("://")
            .map_or("", |(_, rest)| rest.trim_end_matches('/'));
        if origin_host.is_empty() || !origin_host.eq_ignore_ascii_case(host) {
            return Err(ApiError::Forbidden(format!(
                "header `origin`: {origin:?} is not this dashboard's ({host:?})"
            )));
        }
    }
    Ok(())
}

/// `; Secure` when the browser reached the gateway over TLS (a reverse
/// proxy in front of it says so in `X-Forwarded-Proto` or `Forwarded`),
/// so that the cookie is never sent back in clear.
fn secure(headers: &HeaderMap) -> &'static str {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let forwarded_https = get("x-forwarded-proto").is_some_and(|p| {
        p.split(',')
            .next()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
    }) || get("forwarded").is_some_and(|f| {
        f.split([';', ','])
            .any(|kv| kv.trim().eq_ignore_ascii_case("proto=https"))
    });
    if forwarded_https { "; Secure" } else { "" }
}

/// `GET /v1/dashboard`: the latest snapshot (taken every second).
pub async fn snapshot(State(state): State<AppState>, _: Viewer) -> Result<Response, ApiError> {
    enabled(&state)?;
    match state.observers.board.latest() {
        Some(s) => Ok(Json(&*s).into_response()),
        None => Err(ApiError::Unavailable {
            message: "no snapshot taken yet".into(),
            retry_after: Some(INTERVAL),
        }),
    }
}

/// `GET /v1/dashboard/history`: one point a second, oldest first, for
/// the last `ui.history_seconds`.
pub async fn history(State(state): State<AppState>, _: Viewer) -> Result<Json<Value>, ApiError> {
    enabled(&state)?;
    Ok(Json(json!({
        "interval_ms": INTERVAL.as_millis() as u64,
        "points": state.observers.board.history(),
    })))
}

/// Where a stream is.
enum Step {
    /// The history and the latest snapshot, at once.
    Start,
    /// Snapshots as they are taken.
    Live,
}

/// `GET /v1/dashboard/stream`: server-sent events: `history` first (as
/// `/history` answers), the latest `snapshot`, then a `snapshot` every
/// second. A client more than a few snapshots behind is dropped (it
/// reconnects and starts again from the history); the stream ends when
/// the gateway drains.
pub async fn stream(State(state): State<AppState>, _: Viewer) -> Result<Response, ApiError> {
    enabled(&state)?;
    let Some(slot) = crate::dashboard::stream_slot(&state.observers.board) else {
        return Err(ApiError::Unavailable {
            message: format!(
                "{} dashboard streams are open (ui.max_streams)",
                state.config.ui.max_streams
            ),
            retry_after: Some(INTERVAL * 5),
        });
    };
    let rx = state.observers.board.subscribe();
    let events = stream::unfold(
        (Step::Start, rx, state, slot),
        |(step, mut rx, state, slot)| async move {
            match step {
                Step::Start => {
                    let history = json!({
                        "interval_ms": INTERVAL.as_millis() as u64,
                        "points": state.observers.board.history(),
                    });
                    let mut first = sse_event("history", &history).to_vec();
                    if let Some(s) = state.observers.board.latest() {
                        first.extend_from_slice(&sse_event("snapshot", &*s));
                    }
                    Some((Ok(Bytes::from(first)), (Step::Live, rx, state, slot)))
                }
                Step::Live => {
                    if state.is_draining() {
                        return None;
                    }
                    match rx.recv().await {
                        Ok(event) if !state.is_draining() => Some((
                            Ok::<_, std::io::Error>(event),
                            (Step::Live, rx, state, slot),
                        )),
                        Ok(_) | Err(RecvError::Closed) => None,
                        Err(RecvError::Lagged(n)) => {
                            tracing::info!(
                                behind = n,
                                "dashboard stream dropped: the client reads too slowly"
                            );
                            None
                        }
                    }
                }
            }
        },
    );
    let mut res = axum::body::Body::from_stream(events).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *res.status_mut() = StatusCode::OK;
    Ok(res)
}
