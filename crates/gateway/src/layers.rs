//! The request path as a stack of tower layers, composed in one place per
//! family of routes ([`models`] for the model routes, [`proxy`] for
//! `/proxy`) in the order of the
//! architecture's picture:
//!
//! ```text
//! auth → observe → context → cache → dedup → admission → budget → fallback → provider
//!      → usage → retry → limits → bulkhead → wire
//! ```
//!
//! Retry and fallback sit above the limits and the pool, not below: every
//! attempt clears the limiter again (a 429's Retry-After is a pause of the
//! resource there), and every fallback model has limits of its own.
//!
//! `auth` is the extractor a handler takes before it reads its body
//! ([`auth`]); everything after it is a [`Next`] (the crate's own
//! service trait, whose futures are not boxed) wrapped by the
//! [`tower::Layer`] of its file. A request goes down as a [`Req`], which
//! carries its [`Notes`]: what the request holds (its admission slot) and
//! what the layers learn about it (request id, tenant, model, trace). The
//! answer comes back up as a [`Served`] with the notes, so the layer that
//! observes the request reads them in one place, with no lock and no
//! shared state between layers.
//!
//! Every service here is always ready and cheap to clone; a refusal is an
//! answer (`Served::result`), never a service error, so a call's future
//! yields the answer itself, with no `Result` around it.

pub(crate) mod admission;
pub mod auth;
pub(crate) mod budget;
pub(crate) mod bulkhead;
pub(crate) mod cache;
pub mod context;
pub(crate) mod dedup;
pub(crate) mod failure;
pub(crate) mod fallback;
pub(crate) mod grants;
pub(crate) mod limits;
pub(crate) mod mcp;
pub(crate) mod model_call;
pub(crate) mod models;
pub(crate) mod observe;
pub(crate) mod pool;
pub(crate) mod provider;
pub(crate) mod proxy;
pub(crate) mod retry;
pub(crate) mod step;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod upstream;
pub(crate) mod usage;
pub(crate) mod wire;

use std::future::Future;
use std::pin::Pin;

use axum::response::{IntoResponse, Response};
use sluice_admit::Permit;

use crate::error::ApiError;
use crate::response::{Buffered, Meta, Shared, from_shared};
use crate::state::AppState;
use crate::trace::Trace;

/// The service below a layer: always ready, free to clone, never
/// failing (see the module doc). Its call's future is a plain type, not a
/// box: a layer's future holds the one below it inline, so the whole
/// stack is one future, which the handler awaits (axum boxes that one).
pub(crate) trait Next<Req, Res>: Clone + Send + Sync + 'static {
    /// Serves `req`.
    fn call(self, req: Req) -> impl Future<Output = Res> + Send + 'static;
}

/// Calls `inner` once: the stack's services are always ready, so there is
/// nothing to wait for before the call.
pub(crate) fn call<Req, Res, S: Next<Req, Res>>(
    inner: S,
    req: Req,
) -> impl Future<Output = Res> + Send + 'static {
    inner.call(req)
}

/// Calls `inner` once, its future in a box of its own: what a handler
/// awaits, so that the future axum boxes for the handler stays small.
///
/// The stack's future is large (every layer's state inline, about 5 KB;
/// see `models::tests`). A future passed by value into a box
/// (`Box::pin(f)`, as axum boxes the handler's) is copied whole, every
/// byte of it a request; here the box is allocated first and the call
/// writes its future into it in place.
pub(crate) fn call_boxed<Req, Res, S: Next<Req, Res>>(
    inner: S,
    req: Req,
) -> Pin<Box<impl Future<Output = Res> + Send + 'static>> {
    let slot = Box::new_uninit();
    Box::into_pin(Box::write(slot, inner.call(req)))
}

/// A request on its way down, past the context layer.
#[derive(Debug)]
pub(crate) struct Req<T> {
    /// What the route asks for.
    pub call: T,
    /// What the request holds and what was learned so far.
    pub notes: Notes,
}

/// An answer on its way up, with the request's notes.
#[derive(Debug)]
pub(crate) struct Served<T, E = ApiError> {
    /// The answer, or why there is none.
    pub result: Result<T, E>,
    /// What the request held and what the layers learned.
    pub notes: Notes,
}

impl<T, E> Served<T, E> {
    /// An answer.
    pub(crate) fn ok(value: T, notes: Notes) -> Self {
        Served {
            result: Ok(value),
            notes,
        }
    }

    /// A refusal.
    pub(crate) fn err(error: impl Into<E>, notes: Notes) -> Self {
        Served {
            result: Err(error.into()),
            notes,
        }
    }
}

/// What a request holds and what the layers learn about it on the way:
/// [`Fields`] behind one allocation, made once per request.
///
/// Boxed because every layer moves it twice (down in its [`Req`], up in
/// its [`Served`]) and its fields take about a kilobyte: moved by value,
/// those copies were a sixth of the request path's instructions.
#[derive(Debug)]
pub(crate) struct Notes(Box<Fields>);

impl Notes {
    /// The notes of a request to the gateway of `state`, nothing learned
    /// yet.
    pub(crate) fn new(state: &AppState) -> Self {
        Notes(Box::new(Fields {
            state: state.clone(),
            meta: Meta::default(),
            tenant: None,
            label: None,
            trace: None,
            admission: None,
            ledger: None,
            pulse: crate::dashboard::pulse::Tally::default(),
            budget: None,
            unanswered: None,
        }))
    }
}

impl std::ops::Deref for Notes {
    type Target = Fields;

    fn deref(&self) -> &Fields {
        &self.0
    }
}

impl std::ops::DerefMut for Notes {
    fn deref_mut(&mut self) -> &mut Fields {
        &mut self.0
    }
}

/// The fields of [`Notes`].
#[derive(Debug)]
pub(crate) struct Fields {
    /// The gateway's state, which the request brings down the stack (see
    /// [`step::Stateful`]).
    pub state: AppState,
    /// The gateway's own response headers.
    pub meta: Meta,
    /// The tenant, once known (a metrics label).
    pub tenant: Option<String>,
    /// The model (or API) served, once known (a metrics label).
    pub label: Option<String>,
    /// The trace, from when the request is worth one; a streamed answer
    /// takes it and finishes it when the stream ends.
    pub trace: Option<Trace>,
    /// The admission slot, from admission until the answer is published
    /// to the requests that joined it (or dropped with the notes).
    pub admission: Option<Permit<Shared>>,
    /// The call's usage ledger record, when the ledger is on and the
    /// call got as far as its body; a streamed answer takes it and hands
    /// it over when its stream ends.
    pub ledger: Option<crate::ledger::Draft>,
    /// What the dashboard counts of the request.
    pub pulse: crate::dashboard::pulse::Tally,
    /// The call's budget reservation, from the budget layer until an
    /// answer takes it to settle (see `usage`).
    pub budget: Option<sluice_usage::budget::Hold>,
    /// The route of a request the context layer took in, until its
    /// answer reaches `observe`: notes dropped with it still set belong to
    /// a request whose future was dropped unanswered (see the `Drop`).
    pub unanswered: Option<&'static str>,
}

/// A request dropped before its answer (the client closed the connection
/// while it waited in a queue or for its upstream, or a drain ran out of
/// time) is still counted, recorded in the ledger and traced, as status
/// 499: nothing handed to the gateway leaves no record.
impl Drop for Fields {
    fn drop(&mut self) {
        if let Some(route) = self.unanswered.take() {
            observe::abandoned(route, self);
        }
    }
}

/// An answer for the client.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A whole answer, which requests with the same id may share.
    Buffered(Buffered),
    /// A streamed answer, passed on as it comes.
    Stream(Response),
    /// The answer of an identical request that ran.
    Joined(Shared),
    /// An answer from the response cache, or from an identical request's
    /// answer shared by the cache's flight.
    Cached(Response),
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Buffered(b) => b.into_response(),
            Reply::Stream(res) => res,
            Reply::Joined(shared) => from_shared(&shared),
            Reply::Cached(res) => res,
        }
    }
}
