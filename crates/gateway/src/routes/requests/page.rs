//! The request log's page (`/ui/requests`) and its script: static files
//! that hold no data. The page asks for a token and keeps it in the
//! page's memory only (never a cookie, a URL or storage): the admin token
//! reads every tenant's requests (`/v1/requests/all`), a tenant's API key
//! its own (`/v1/requests`), each sent as `Authorization: Bearer`.

use axum::extract::{Path, State};
use axum::response::Response;

use crate::error::ApiError;
use crate::layers::auth::Anyone;
use crate::routes::dashboard::{HTML, file, script_or_style};
use crate::state::AppState;

const PAGE: &str = include_str!("../../../assets/ui/requests.html");
const SCRIPT: &str = include_str!("../../../assets/ui/requests.js");
const STYLE: &str = include_str!("../../../assets/ui/requests.css");

/// `GET /ui/requests`: the page (404 while `ui.enabled = false`).
pub async fn page(State(state): State<AppState>, _: Anyone) -> Result<Response, ApiError> {
    file(&state, HTML, PAGE)
}

/// `GET /ui/requests/assets/{file}`: its script and its style (on top of
/// the dashboard's).
pub async fn asset(
    State(state): State<AppState>,
    _: Anyone,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    script_or_style(
        &state,
        &name,
        ("requests.js", SCRIPT),
        ("requests.css", STYLE),
    )
}
