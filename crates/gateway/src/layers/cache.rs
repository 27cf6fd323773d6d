//! Cache: answers a repeated model request from the response cache
//! (docs/cache.md) before it reaches deduplication and admission, so that
//! a hit spends no queue slot, no limiter token and no budget; stores the
//! answer of a miss (a stream once it has ended properly); and lets
//! identical misses in flight together send one upstream call between
//! them ([`flight`]).
//!
//! The client steers it with `x-sluice-cache` (`off`, `refresh`,
//! `only-if-cached`), `x-sluice-cache-ttl` and `x-sluice-session`; every
//! answer says `x-sluice-cache: hit`, `miss` or `bypass`, and a hit its
//! `age`. An answer from a fallback model is served, never stored: it is
//! not the answer of the model asked for.

mod lookup;
mod stream;

use std::sync::Arc;

use axum::http::StatusCode;
use tokio::time::Instant;

use super::model_call::Call;
use super::step::{Step, StepLayer};
use super::{Next, Reply, Req, Served, call, observe};
use crate::cache::flight::{self, Role};
use crate::state::AppState;
use lookup::{Asked, Looked, Pending, lookup};
use sluice_usage::{Endpoint, WireFormat};

/// Wraps the path below in [`Cache`].
pub(crate) type CacheLayer = StepLayer<Cache>;

/// See the module doc.
pub(crate) enum Cache {}

impl<S> Step<Req<Box<Call>>, S> for Cache
where
    S: Next<Req<Box<Call>>, Served<Reply>>,
{
    type Response = Served<Reply>;

    async fn serve(state: AppState, inner: S, req: Req<Box<Call>>) -> Served<Reply> {
        serve(&state, inner, req).await
    }
}

async fn serve<S>(state: &AppState, inner: S, req: Req<Box<Call>>) -> Served<Reply>
where
    S: Next<Req<Box<Call>>, Served<Reply>>,
{
    let Req {
        call: mut c,
        mut notes,
    } = req;
    if matches!(c.endpoint, Endpoint::Generate | Endpoint::Transcriptions) {
        // Gemini clients' answers are not cached: a cached answer is
        // replayed as a stream in OpenAI's and Anthropic's shapes only.
        // Nor are transcripts: the call's JSON view names its audio file
        // by name and size, not by its bytes, so it is no key.
        notes.meta.cache = Some("bypass");
        return call(inner, Req { call: c, notes }).await;
    }
    let prov = c.provider(state);
    let asked = Asked {
        endpoint: c.endpoint,
        tenant: &c.ctx.workspace,
        provider: &prov.name,
        // What the client gets is in its route's format, whatever the
        // provider speaks (the gateway translates chat for Anthropic and
        // Gemini models).
        format: match c.endpoint {
            Endpoint::Messages => WireFormat::Anthropic,
            Endpoint::Generate => WireFormat::Gemini,
            _ => WireFormat::Openai,
        },
        model: &c.model,
        json: &c.json,
        headers: &c.headers,
    };
    let started = Instant::now();
    let pending = match lookup(
        &state.spend.cache,
        &state.spend.cache_tenants,
        &state.config,
        asked,
    )
    .await
    {
        Err(e) => return Served::err(e, notes),
        Ok(Looked::Hit(res)) => {
            observe::cache_looked(&mut notes, started, "hit");
            return Served::ok(Reply::Cached(res), notes);
        }
        Ok(Looked::Bypass) => {
            notes.meta.cache = Some("bypass");
            observe::cache_looked(&mut notes, started, "bypass");
            return call(inner, Req { call: c, notes }).await;
        }
        Ok(Looked::Miss(p)) => {
            notes.meta.cache = Some("miss");
            observe::cache_looked(&mut notes, started, "miss");
            p
        }
    };
    let mut pending = pending;
    pending.ask_usage(&mut c.json);
    let leader = if pending.shared() {
        match lead(state, &pending, c.ctx.deadline).await {
            Led::Served(res) => return Served::ok(Reply::Cached(res), notes),
            Led::Leader(l) => l,
        }
    } else {
        None
    };
    let Served { result, notes } = call(inner, Req { call: c, notes }).await;
    // A fallback model's answer is not the asked model's: served only.
    let fallback = notes.meta.model.is_some();
    let result = match result {
        Ok(Reply::Buffered(b)) if !fallback => {
            if let Some(answer) = Pending::whole(&b) {
                pending.keep(answer.clone()).await;
                if let Some(l) = leader {
                    l.publish(Arc::new(answer));
                }
            }
            Ok(Reply::Buffered(b))
        }
        Ok(Reply::Stream(res)) if !fallback && res.status() == StatusCode::OK => {
            Ok(Reply::Stream(stream::tee(pending, leader, res)))
        }
        other => other,
    };
    Served { result, notes }
}

/// How a shared miss went into its flight.
enum Led {
    /// Served from an identical request's answer.
    Served(axum::response::Response),
    /// Goes upstream, leading a flight (or none, past the deadline).
    Leader(Option<flight::Leader>),
}

/// Leads the flight of `pending`'s key, or waits for the one in progress
/// and is served from its answer. A flight whose leader had nothing to
/// share is followed by another, led by one of those who waited.
async fn lead(state: &AppState, pending: &Pending, deadline: Instant) -> Led {
    loop {
        match state.spend.cache_flights.enter(pending.key()) {
            Role::Lead(leader) => {
                // An identical request may have stored its answer since
                // our lookup, its flight already over.
                if let Some((res, answer)) = pending.recheck().await {
                    leader.publish(Arc::new(answer));
                    return Led::Served(res);
                }
                return Led::Leader(Some(leader));
            }
            Role::Join(rx) => {
                if let Some(answer) = flight::wait(rx, deadline).await {
                    return Led::Served(pending.serve(&answer));
                }
                if Instant::now() >= deadline {
                    // The path below answers for the deadline.
                    return Led::Leader(None);
                }
            }
        }
    }
}
