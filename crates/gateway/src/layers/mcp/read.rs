//! One read of a server's own content (`resources/read`, `prompts/get`)
//! through the gateway: the admission queue in the server's lane
//! (`mcp:{server}`), the key's and tenant's limits, a slot of the `api`
//! pool, one send within the attempt timeout, and a ledger record (kind
//! `resource` or `prompt`). It takes no API's quota: the server answers
//! from its own content, not from the API behind its tools.

use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::ServerResult;
use sluice_mcp::{Pass, Read, UpstreamError};
use tokio::time::Instant;

use super::{Asker, rpc_error};
use crate::error::ApiError;
use crate::ledger::Draft;

pub(super) async fn run(a: Asker, read: Read, pass: Pass) -> Result<ServerResult, ErrorData> {
    let Asker { state, ctx } = a;
    let draft = (state.observers.ledger.as_ref())
        .map(|_| Draft::read(&ctx, read.kind.as_str(), &read.server, &read.target));
    let lane = format!("mcp:{}", read.server);
    let mut queued = Duration::ZERO;
    let outcome = send(&state, &ctx, &lane, pass, &mut queued).await;
    let status = match &outcome {
        Ok(Ok(_)) => 200,
        Ok(Err(e)) => e.status(),
        Err(e) => e.status().as_u16(),
    };
    if let (Some(ledger), Some(d)) = (state.observers.ledger.as_ref(), draft) {
        let sent = u32::from(outcome.is_ok());
        ledger.submit(d.finish(status, queued, sent));
    }
    match outcome {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(e.into_rpc(&read.server)),
        Err(e) => Err(rpc_error(&e)),
    }
}

/// Admission, the caller's limits and a pool slot, then the one send:
/// `Err` when the gateway refused it, else how the server answered.
async fn send(
    state: &crate::state::AppState,
    ctx: &crate::request::Context,
    lane: &str,
    pass: Pass,
    queued: &mut Duration,
) -> Result<Result<ServerResult, UpstreamError>, ApiError> {
    let needs = crate::keys::caller_needs(
        state.stores.keystore.as_ref(),
        &state.limits.shared,
        ctx,
        None,
    )?
    .needs;
    let mut slot = super::admit(state, ctx, lane).await?;
    *queued = slot.waited();
    let _grant = if needs.is_empty() {
        None
    } else {
        let needs: Vec<(&str, u64)> = needs.iter().map(|(r, c)| (r.as_str(), *c)).collect();
        let grant = (state
            .limits
            .shared
            .acquire_many(&needs, Some(ctx.deadline))
            .await)
            .map_err(|e| ApiError::from_limit(e, None))?;
        Some(grant)
    };
    let tenant = (!state.is_open()).then_some(ctx.workspace.as_str());
    let _pool = (state.admission.bulkheads.get("api"))
        .acquire_for(tenant, ctx.deadline)
        .await?;
    slot.dispatched();
    let timeout = Duration::from_millis(state.config.retry.attempt_timeout_ms)
        .min(ctx.deadline.saturating_duration_since(Instant::now()));
    Ok(pass.send(timeout).await)
}
