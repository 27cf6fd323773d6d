//! One tool call through the gateway, in the order of a `/proxy` call:
//! admission → (limits → pool → send)* → ledger and metrics.
//!
//! Attempts: a call the API refused for its rate (an HTTP 429 from the
//! MCP server, or a tool result saying 429) was not carried out, and a
//! server that could not be reached was sent nothing, so both are tried
//! again (each attempt clears the limiter again, which the 429 paused);
//! a connection that failed mid-call or timed out is tried again only
//! for a tool that says it is safe to (`readOnlyHint`/`idempotentHint`).
//! At most `retry.max_attempts` in all, within the request's deadline.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use sluice_limit::headers::RateLimitHeaders;
use sluice_mcp::{Attempt, ToolCall, UpstreamError, rate_limit_of};
use tokio::time::Instant;

use super::{Asker, rpc_error};
use crate::error::ApiError;
use crate::ledger::Draft;
use crate::limits::resources::inflight_resource;
use crate::metrics;

/// How an attempt ended, for the loop and the records.
enum Ended {
    /// A result for the client (a tool's own error result included).
    Result(CallToolResult),
    /// The API refused for its rate.
    Throttled(Option<Duration>, Option<CallToolResult>),
    /// No result.
    Failed(UpstreamError),
}

pub(super) async fn run(
    a: Asker,
    call: ToolCall,
    attempt: Attempt,
) -> Result<CallToolResult, ErrorData> {
    let Asker { state, ctx } = a;
    let mcp = state
        .upstreams
        .mcp
        .as_ref()
        .ok_or_else(|| ErrorData::internal_error("no [[mcp_servers]] are configured", None))?;
    let api = mcp
        .api_of(&state.limits.tools, &call.server, &call.tool)
        .filter(|api| state.config.api(api).is_some())
        .map(str::to_owned);
    if let (Some(api), Some(c)) = (&api, &ctx.caller)
        && !c.allows_api(api)
    {
        return Err(ErrorData::new(
            sluice_mcp::POLICY_DENIED,
            format!(
                "tool {:?} calls the API {api:?}, which is not allowed for this API key (its `apis` allow-list)",
                call.name
            ),
            None,
        ));
    }
    let label = api
        .clone()
        .unwrap_or_else(|| format!("mcp:{}", call.server));
    let resource = api.as_deref().map(sluice_limit::api_resource);
    let mut draft = state.observers.ledger.as_ref().map(|_| {
        Draft::tool(
            &ctx,
            api.as_deref().unwrap_or(&call.server),
            &call.server,
            &call.tool,
        )
    });
    let started = Instant::now();
    let plan = Plan {
        state: &state,
        ctx: &ctx,
        call: &call,
        attempt: &attempt,
        resource: resource.as_deref(),
        lane: &label,
    };
    let outcome = attempts(&plan).await;
    let (status, attempts_made, queued) = match &outcome {
        Ok((ended, n, q)) => (status_of(ended), *n, *q),
        Err(e) => (e.status().as_u16(), 0, Duration::ZERO),
    };
    let ended = Instant::now();
    let took = (ended - started).as_secs_f64();
    metrics::mcp_tool_call(&call.server, &label, status, took);
    (state.observers.board.tools).count(&call.server, &call.tool, &label, status, took * 1e3);
    if let (Some(ledger), Some(d)) = (state.observers.ledger.as_ref(), draft.take()) {
        ledger.submit(d.finish(status, queued, attempts_made));
    }
    let error = match &outcome {
        Err(e) => Some(e.to_string()),
        Ok((Ended::Failed(e), ..)) => Some(e.to_string()),
        Ok(_) => None,
    };
    crate::otel::tool_call(
        state.observers.otel.as_ref(),
        &ctx,
        &crate::otel::ToolSpan {
            name: &call.name,
            server: &call.server,
            tool: &call.tool,
            call_id: &call.call_id,
            api: api.as_deref(),
            status,
            attempts: attempts_made,
            span: (started, ended),
            admitted: started + queued,
            error: error.as_deref(),
        },
    );
    match outcome {
        Err(e) => Err(rpc_error(&e)),
        Ok((Ended::Result(r), ..)) | Ok((Ended::Throttled(_, Some(r)), ..)) => Ok(r),
        Ok((Ended::Throttled(retry_after, None), ..)) => {
            Err(UpstreamError::RateLimited { retry_after }.into_rpc(&call.server))
        }
        Ok((Ended::Failed(e), ..)) => Err(e.into_rpc(&call.server)),
    }
}

/// The status the ledger and metrics record.
fn status_of(ended: &Ended) -> u16 {
    match ended {
        Ended::Result(_) => 200,
        Ended::Throttled(..) => 429,
        Ended::Failed(e) => e.status(),
    }
}

/// One call's parts, as its attempts need them.
struct Plan<'a> {
    state: &'a crate::state::AppState,
    ctx: &'a crate::request::Context,
    call: &'a ToolCall,
    attempt: &'a Attempt,
    /// Its API's limiter resource, if it has an API.
    resource: Option<&'a str>,
    /// Its admission lane and metrics label.
    lane: &'a str,
}

/// Admission, then the attempts: how the last ended, how many were
/// made, how long the call queued.
async fn attempts(p: &Plan<'_>) -> Result<(Ended, u32, Duration), ApiError> {
    let Plan {
        state,
        ctx,
        resource,
        lane,
        ..
    } = *p;
    let mut needs: Vec<(String, u64)> = Vec::new();
    if let Some(r) = resource {
        needs.push((r.to_owned(), 1));
        let api = r.strip_prefix(sluice_limit::API_PREFIX).unwrap_or(r);
        if state
            .config
            .api(api)
            .is_some_and(|c| c.max_in_flight.is_some())
        {
            needs.push((inflight_resource(r), 1));
        }
    }
    needs.extend(
        crate::keys::caller_needs(
            state.stores.keystore.as_ref(),
            &state.limits.shared,
            ctx,
            None,
        )?
        .needs,
    );
    let needs: Vec<(&str, u64)> = needs.iter().map(|(r, c)| (r.as_str(), *c)).collect();
    // The same queue as model and proxied calls, in the API's lane.
    let mut slot = super::admit(state, ctx, lane).await?;
    let queued = slot.waited();
    // Request budgets count a tool call as they count a proxied call:
    // kept once the server answered, given back otherwise.
    let hold = crate::layers::budget::reserve_request(state, ctx).await?;
    let sent = send(p, &needs, &mut slot).await;
    if let Some(h) = hold {
        match &sent {
            Ok((Ended::Result(_), _)) => {}
            _ => h.release(),
        }
    }
    sent.map(|(ended, n)| (ended, n, queued))
}

/// The attempts of an admitted call: how the last ended and how many
/// were made.
async fn send(
    p: &Plan<'_>,
    needs: &[(&str, u64)],
    slot: &mut sluice_admit::Permit<crate::response::Shared>,
) -> Result<(Ended, u32), ApiError> {
    let Plan {
        state,
        ctx,
        call,
        attempt,
        resource,
        lane,
    } = *p;
    let retry = &state.config.retry;
    let last_send = ctx
        .deadline
        .checked_sub(Duration::from_millis(retry.min_time_left_ms))
        .unwrap_or(ctx.deadline);
    let tenant = if state.is_open() {
        None
    } else {
        Some(ctx.workspace.as_str())
    };
    let mut pool = None;
    let mut n = 0;
    // How the attempt before ended: when the limiter will not have the
    // call go again in time, that is the answer (the API's own 429).
    let mut last: Option<Ended> = None;
    loop {
        n += 1;
        let until = last_send.min(Instant::now() + Duration::from_millis(retry.max_retry_after_ms));
        let waited_from = Instant::now();
        let mut grant = if needs.is_empty() {
            None
        } else {
            match state.limits.shared.acquire_many(needs, Some(until)).await {
                Ok(g) => Some(g),
                Err(e) => {
                    metrics::limiter_refusal(lane, "rate_limited");
                    if let Some(ended) = last {
                        return Ok((ended, n - 1));
                    }
                    let policy = match resource {
                        Some(r) => state
                            .limits
                            .shared
                            .get_capacity(r)
                            .await
                            .ok()
                            .map(|c| (c.total, c.window)),
                        None => None,
                    };
                    return Err(ApiError::from_limit(e, policy));
                }
            }
        };
        metrics::limiter_wait(lane, waited_from.elapsed().as_secs_f64());
        if pool.is_none() {
            let p = state
                .admission
                .bulkheads
                .get("api")
                .acquire_for(tenant, ctx.deadline)
                .await?;
            pool = Some(p);
            // Past the limiter and the pool: the queue's slot goes back.
            slot.dispatched();
        }
        let timeout = Duration::from_millis(retry.attempt_timeout_ms)
            .min(ctx.deadline.saturating_duration_since(Instant::now()));
        let ended = match attempt.send(timeout).await {
            Ok(result) => match rate_limit_of(&result) {
                Some(rl) => Ended::Throttled(rl.retry_after, Some(result)),
                None => Ended::Result(result),
            },
            Err(UpstreamError::RateLimited { retry_after }) => Ended::Throttled(retry_after, None),
            Err(e) => Ended::Failed(e),
        };
        // What the API said about its rate goes to the limiter, as a
        // `/proxy` answer's status and headers do.
        let status = match &ended {
            Ended::Throttled(..) => 429,
            Ended::Failed(UpstreamError::Unavailable(_)) => 0,
            _ => 200,
        };
        if let (Some(r), Some(g)) = (resource, grant.as_mut()) {
            if status == 0 {
                // Nothing was sent: the request goes back.
                g.settle(0);
            } else {
                let mut headers = RateLimitHeaders::default();
                if let Ended::Throttled(after, _) = &ended {
                    headers.retry_after = *after;
                    metrics::upstream_429(r);
                }
                let _ = state
                    .limits
                    .shared
                    .observe(Some(g), Some(r), None, status, &headers)
                    .await;
            }
        }
        let again = match &ended {
            Ended::Throttled(..) | Ended::Failed(UpstreamError::Unavailable(_)) => true,
            Ended::Failed(UpstreamError::Transport(_) | UpstreamError::Timeout) => call.idempotent,
            _ => false,
        };
        if !again || n >= retry.max_attempts.max(1) || Instant::now() >= last_send {
            return Ok((ended, n));
        }
        metrics::retry(lane, if status == 429 { "throttled" } else { "error" });
        if !matches!(ended, Ended::Throttled(..)) {
            // The limiter paces throttled calls (the 429 paused it); a
            // server that failed is given a moment.
            let backoff = Duration::from_millis(retry.initial_backoff_ms << (n - 1).min(8))
                .min(Duration::from_millis(retry.max_backoff_ms));
            let wake = (Instant::now() + backoff).min(last_send);
            tokio::time::sleep_until(wake).await;
        }
        last = Some(ended);
    }
}
