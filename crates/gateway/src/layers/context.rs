//! Request id and context: what a request says about itself in its
//! headers — who (tenant), how urgent (priority), which conversation
//! (thread), which request (id), and how long it may take (deadline) —
//! then what its route asks for ([`Parse`]), read once, here.
//!
//! The layer refuses a request while the gateway drains, and one whose
//! headers or body are bad, before it costs a queue slot or a trace.
//!
//! Two headers are never a reason to refuse: an `x-request-id` that is
//! too long or holds other characters than ASCII letters, digits and
//! `-_.:+=@` is replaced by a new id, and a `traceparent` that is not
//! W3C Trace Context starts a new trace (its `tracestate` dropped with
//! it). [`Context::propagate`] sends the id and the trace upstream;
//! [`stamp`] makes sure every answer, errors included, carries an id.

mod headers;

use axum::http::HeaderMap;

use super::observe::Routed;
use super::step::{Step, StepLayer};
use super::{Next, Notes, Reply, Req, Served, call};
use crate::error::ApiError;
use crate::layers::auth::Tenant;
use crate::state::AppState;

pub use crate::layers::auth::DEFAULT_WORKSPACE;
pub use crate::request::{Context, new_id, new_span_id};
pub(crate) use headers::check_priority;

/// A request as its handler hands it over: what the context layer needs
/// to read it.
pub(crate) trait Parse: Send + 'static {
    /// What the route asks for, read and checked.
    type Parsed: Send + 'static;

    /// The caller, authenticated by its extractor.
    fn tenant(&self) -> &Tenant;

    /// The request's headers.
    fn headers(&self) -> &HeaderMap;

    /// Reads what the route asks for. `notes` learns the labels the route
    /// knows even when it refuses (and the trace, once the request is
    /// worth one).
    ///
    /// # Errors
    /// The refusal, naming the field, header or path segment at fault.
    fn parse(
        self,
        state: &AppState,
        ctx: Context,
        notes: &mut Notes,
    ) -> Result<Self::Parsed, ApiError>;
}

/// Wraps a stack in [`WithContext`].
pub(crate) type ContextLayer = StepLayer<WithContext>;

/// See the module doc.
pub(crate) enum WithContext {}

impl<R, S> Step<R, S> for WithContext
where
    R: Parse + Routed,
    S: Next<Req<R::Parsed>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: R) -> Served<Reply> {
        let mut notes = Notes::new(&state);
        notes.unanswered = Some(req.route());
        let ctx = match read(&state, &req, &mut notes) {
            Ok(ctx) => ctx,
            Err(e) => return Served::err(e, notes),
        };
        let parsed = match req.parse(&state, ctx, &mut notes) {
            Ok(p) => p,
            Err(e) => return Served::err(e, notes),
        };
        call(
            inner,
            Req {
                call: parsed,
                notes,
            },
        )
        .await
    }
}

/// The context of `req`, its id and tenant noted for the answer.
fn read<R: Parse>(state: &AppState, req: &R, notes: &mut Notes) -> Result<Context, ApiError> {
    state.grace.check_open()?;
    let ctx = Context::from_headers(state, req.tenant(), req.headers())?;
    notes.meta.request_id = ctx.request_id.clone();
    notes.tenant = Some(ctx.workspace.clone());
    Ok(ctx)
}

#[cfg(test)]
#[path = "context/tests.rs"]
mod tests;
