//! The job browser's page (`/ui/jobs`) and its script: static files that
//! hold no data. The page asks for the admin token and keeps it in the
//! page's memory only (never a cookie, a URL or storage), and sends it as
//! `Authorization: Bearer` to the admin job routes: a change is never
//! authorized by something the browser sends on its own, so another site
//! cannot make one.

use axum::extract::{Path, State};
use axum::response::Response;

use crate::error::ApiError;
use crate::layers::auth::Anyone;
use crate::routes::dashboard::{HTML, file, script_or_style};
use crate::state::AppState;

const PAGE: &str = include_str!("../../../assets/ui/jobs.html");
const SCRIPT: &str = include_str!("../../../assets/ui/jobs.js");
const STYLE: &str = include_str!("../../../assets/ui/jobs.css");

/// `GET /ui/jobs`: the page (404 while `ui.enabled = false`).
pub async fn page(State(state): State<AppState>, _: Anyone) -> Result<Response, ApiError> {
    file(&state, HTML, PAGE)
}

/// `GET /ui/jobs/assets/{file}`: its script and its style (on top of the
/// dashboard's).
pub async fn asset(
    State(state): State<AppState>,
    _: Anyone,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    script_or_style(&state, &name, ("jobs.js", SCRIPT), ("jobs.css", STYLE))
}
