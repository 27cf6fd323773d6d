//! One upstream call with everything around it: the limiter before every
//! attempt, the bulkhead, retries with full-jitter backoff on connect
//! errors, timeouts and 5xx, and 429s reported to the limiter first, their
//! Retry-After honoured (through the limiter's pause) up to a cap.

use std::time::{Duration, SystemTime};

use sluice_admit::BulkheadPermit;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::layers::failure::{Failure, describe};
use crate::layers::limits::upstream_limits;
use crate::layers::retry::backoff;
use crate::metrics;
use crate::providers::Provider;
use crate::state::AppState;
use crate::trace::Trace;
use sluice_limit::Permit;

/// What to limit a call on.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// `(resource, cost)` taken before every attempt.
    pub needs: Vec<(String, u64)>,
    /// The resource upstream request quotas (and 429s) apply to.
    pub requests: String,
    /// The resource upstream token quotas apply to, if limited.
    pub tokens: Option<String>,
    /// The bulkhead pool.
    pub pool: &'static str,
    /// Whether the call may be sent again (non-idempotent calls are not).
    pub retryable: bool,
    /// The provider or API, for metrics.
    pub label: String,
    /// The model provider's adapter, which reads its rate-limit headers;
    /// `None` for APIs (generic headers).
    pub provider: Option<&'static dyn Provider>,
}

/// One attempt, for traces: the limiter wait before it, then the call.
#[derive(Debug, Clone)]
pub(crate) struct AttemptRecord {
    pub limiter_start: Instant,
    pub sent: Instant,
    pub ended: Instant,
    pub status: Option<u16>,
    pub outcome: &'static str,
}

/// A call that got an answer worth passing on (2xx, or a 4xx that is the
/// client's to see), with what it holds until the answer is delivered.
#[derive(Debug)]
pub(crate) struct Answered {
    pub response: reqwest::Response,
    pub grant: Permit,
    pub permit: BulkheadPermit,
    pub attempts: u32,
    /// Time spent waiting for the limiter and the pool.
    pub waited: Duration,
}

/// Runs `send` under `plan` until it answers, retrying as configured.
/// `on_granted` runs once, when the first attempt has cleared the limiter
/// and the pool (the admission queue's slot can go to the next request).
pub(crate) async fn call<F>(
    state: &AppState,
    plan: &Plan,
    deadline: Instant,
    log: &mut Vec<AttemptRecord>,
    on_granted: &mut (dyn FnMut() + Send),
    mut send: F,
) -> Result<Answered, Failure>
where
    F: FnMut() -> reqwest::RequestBuilder,
{
    let cfg = &state.config.retry;
    let max_attempts = if plan.retryable {
        cfg.max_attempts.max(1)
    } else {
        1
    };
    let needs: Vec<(&str, u64)> = plan.needs.iter().map(|(r, c)| (r.as_str(), *c)).collect();
    let mut permit: Option<BulkheadPermit> = None;
    let mut waited = Duration::ZERO;
    let mut attempt = 0;
    loop {
        attempt += 1;
        // Wait for the limiter at most the Retry-After cap: past it, a fast
        // 429 tells the client when to come back instead of holding it.
        let cap = Instant::now() + Duration::from_millis(cfg.max_retry_after_ms);
        let limit_deadline = deadline.min(cap);
        let t0 = Instant::now();
        let acquired = tokio::select! {
            biased;
            () = state.grace_over() => return Err(Failure::Limited(AppState::grace_ended())),
            r = state.limits.acquire_many(&needs, Some(limit_deadline)) => r,
        };
        let grant = match acquired {
            Ok(g) => g,
            Err(e) => {
                let reason = match &e {
                    sluice_limit::Error::InsufficientCapacity { .. } => "too_large",
                    sluice_limit::Error::Closed => "closed",
                    _ => "rate_limited",
                };
                metrics::limiter_refusal(&plan.requests, reason);
                let policy = state
                    .limits
                    .get_capacity(&plan.requests)
                    .await
                    .ok()
                    .map(|c| (c.total, c.window));
                return Err(Failure::Limited(ApiError::from_limit(e, policy)));
            }
        };
        if permit.is_none() {
            let pool = state.bulkheads.get(plan.pool);
            let acquired = tokio::select! {
                biased;
                () = state.grace_over() => return Err(Failure::Limited(AppState::grace_ended())),
                r = pool.acquire(deadline) => r,
            };
            permit = Some(acquired.map_err(|e| {
                metrics::limiter_refusal(&plan.requests, "pool_full");
                Failure::Limited(e.into())
            })?);
        }
        if attempt == 1 {
            on_granted();
        }
        waited += t0.elapsed();
        metrics::limiter_wait(&plan.requests, t0.elapsed().as_secs_f64());
        for (resource, cost) in &plan.needs {
            metrics::tokens_acquired(resource, *cost);
        }
        let sent = Instant::now();
        let mut grant = grant;
        let timeout = Duration::from_millis(cfg.attempt_timeout_ms)
            .min(deadline.saturating_duration_since(Instant::now()));
        let result = tokio::time::timeout(timeout, send().send()).await;
        let (status, outcome) = match &result {
            Ok(Ok(r)) if r.status().as_u16() == 429 => (Some(429), "throttled"),
            Ok(Ok(r)) if r.status().as_u16() == 408 || r.status().is_server_error() => {
                (Some(r.status().as_u16()), "error")
            }
            Ok(Ok(r)) => (Some(r.status().as_u16()), "answered"),
            Ok(Err(e)) if e.is_connect() => (None, "connect_error"),
            Ok(Err(_)) => (None, "transport_error"),
            Err(_) => (None, "timeout"),
        };
        metrics::upstream_latency(&plan.label, sent.elapsed().as_secs_f64());
        metrics::upstream_attempt(&plan.label, outcome);
        if status == Some(429) {
            metrics::upstream_429(&plan.requests);
        }
        log.push(AttemptRecord {
            limiter_start: t0,
            sent,
            ended: Instant::now(),
            status,
            outcome,
        });
        let retry_wait = match result {
            Ok(Ok(response)) => {
                let status = response.status().as_u16();
                let limits = match plan.provider {
                    Some(p) => p.rate_limits(response.headers(), SystemTime::now()),
                    None => upstream_limits(response.headers()),
                };
                let _ = state
                    .limits
                    .observe(
                        Some(&grant),
                        Some(&plan.requests),
                        plan.tokens.as_deref(),
                        status,
                        &limits,
                    )
                    .await;
                let transient = status == 429 || status == 408 || status >= 500;
                // A call that may not be sent again passes on whatever came.
                if !transient || !plan.retryable {
                    return Ok(Answered {
                        response,
                        grant,
                        permit: permit.take().expect("acquired above"),
                        attempts: attempt,
                        waited,
                    });
                }
                refund_tokens(&mut grant, plan);
                if status == 429 {
                    let retry_after = limits.retry_after;
                    if let Some(r) = retry_after {
                        metrics::retry_after(r.as_secs_f64());
                    }
                    let too_long = retry_after
                        .is_some_and(|r| r > Duration::from_millis(cfg.max_retry_after_ms));
                    if attempt >= max_attempts || too_long {
                        return Err(Failure::Throttled {
                            retry_after,
                            attempts: attempt,
                        });
                    }
                    // The limiter now pauses the resource for the Retry-After:
                    // the next acquire waits exactly that long.
                    None
                } else {
                    if attempt >= max_attempts {
                        return Err(Failure::Upstream {
                            message: format!("upstream answered {status} after {attempt} attempts"),
                            attempts: attempt,
                        });
                    }
                    Some(backoff(cfg, attempt))
                }
            }
            Ok(Err(e)) => {
                refund_tokens(&mut grant, plan);
                if attempt >= max_attempts {
                    return Err(Failure::Upstream {
                        message: describe(&e),
                        attempts: attempt,
                    });
                }
                Some(backoff(cfg, attempt))
            }
            Err(_elapsed) => {
                refund_tokens(&mut grant, plan);
                if Instant::now() >= deadline || attempt >= max_attempts {
                    return Err(Failure::Timeout { attempts: attempt });
                }
                Some(backoff(cfg, attempt))
            }
        };
        drop(grant);
        metrics::retry(&plan.label, outcome);
        if let Some(wait) = retry_wait {
            if Instant::now() + wait >= deadline {
                return Err(Failure::Timeout { attempts: attempt });
            }
            tokio::select! {
                biased;
                () = state.grace_over() => return Err(Failure::Limited(AppState::grace_ended())),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Trace spans for each attempt: the limiter wait, then the upstream call.
pub(crate) fn record_attempts(
    trace: &mut Trace,
    log: &[AttemptRecord],
    upstream: &str,
    resource: &str,
) {
    for (i, a) in log.iter().enumerate() {
        let attempt = serde_json::Value::from(i + 1);
        let mut m = serde_json::Map::new();
        m.insert("attempt".into(), attempt.clone());
        m.insert("resource".into(), resource.into());
        trace.record_span("limiter", a.limiter_start, a.sent, m);
        let mut m = serde_json::Map::new();
        m.insert("attempt".into(), attempt);
        m.insert("upstream".into(), upstream.into());
        m.insert("outcome".into(), a.outcome.into());
        if let Some(s) = a.status {
            m.insert("status".into(), s.into());
        }
        trace.record_span("upstream", a.sent, a.ended, m);
    }
}

/// A failed attempt used no tokens.
fn refund_tokens(grant: &mut Permit, plan: &Plan) {
    if let Some(t) = &plan.tokens {
        let _ = grant.settle_part(t, 0);
    }
}
