//! `ANY /proxy/{api}/{*path}`: a configured SaaS API, under its limits.
//!
//! The handler splits the path and hands the request to the proxy route's
//! stack ([`crate::layers::proxy`]): context → admission → forward →
//! retry → limits → bulkhead → upstream.

use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};

use crate::body::HeadersAndBody;
use crate::layers::auth::Tenant;
use crate::layers::proxy::{Incoming, target};
use crate::layers::{self};
use crate::state::AppState;

/// The handler.
pub async fn proxy(
    State(state): State<AppState>,
    tenant: Tenant,
    method: Method,
    uri: Uri,
    HeadersAndBody(headers, body): HeadersAndBody,
) -> Response {
    // The path as sent, still encoded: decoded here, once (see `target`).
    let (api, rest) = match target::split(uri.path()) {
        Ok(split) => split,
        Err(e) => return e.into_response(),
    };
    let req = Incoming {
        state,
        tenant,
        method,
        rest: rest.to_owned(),
        api,
        query: uri.query().map(str::to_owned),
        headers,
        body,
    };
    layers::call_boxed(layers::proxy::stack(), req).await
}
