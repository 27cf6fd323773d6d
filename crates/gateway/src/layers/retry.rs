//! Retry: an upstream call is sent again on connect errors, timeouts,
//! 408s, 5xx and a model's 200 that is not an answer (`retry/answer.rs`)
//! (after a full-jitter backoff) and on 429s (after the Retry-After,
//! which the limiter now enforces as a pause of the resource), up to
//! `retry.max_attempts`, never past the request's deadline nor the
//! shutdown grace. Each attempt goes through the limits
//! and the pool again; a failed attempt gives its reserved tokens back.
//!
//! # Why not `backon`
//!
//! `backon`'s exponential backoff adds a jitter *on top of* the delay
//! (`d + rand·d`, which passes the configured maximum), where ours is full
//! jitter (`rand·min(max, d)`), and its retry driver sleeps between
//! attempts by itself: here a 429's wait is the limiter's pause (so every
//! request for the resource waits, not only this one), each attempt must
//! clear the limiter again, and the wait must stop at the request's
//! deadline and at the end of the shutdown grace. What would remain of it
//! is the delay sequence, which is [`backoff`]'s five lines.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use self::answer::Checked;
use super::failure::{Failure, describe};
use super::step::{Step, StepLayer};
use super::upstream::{Answered, Fault, Granted, Tried, Try, Upstream};
use super::{Next, Req, Served, call, observe};
use crate::config::RetryConfig;
use crate::state::AppState;

/// Wraps a stack in [`Retry`].
pub(crate) type RetryLayer = StepLayer<Retry>;

/// See the module doc.
pub(crate) enum Retry {}

impl<S> Step<Req<Arc<Upstream>>, S> for Retry
where
    S: Next<Req<Try>, Served<Granted, Failure>>,
{
    type Response = Served<Answered, Failure>;

    async fn serve(
        state: AppState,
        inner: S,
        req: Req<Arc<Upstream>>,
    ) -> Served<Answered, Failure> {
        let Req {
            call: up,
            mut notes,
        } = req;
        let cfg = &state.config.retry;
        let plan = &up.plan;
        let max_attempts = if plan.retryable && !plan.once {
            cfg.max_attempts.max(1)
        } else {
            1
        };
        let mut pool = None;
        let mut waited = Duration::ZERO;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let t = Try {
                upstream: up.clone(),
                attempt,
                pool: pool.take(),
                limiter_start: Instant::now(),
            };
            let served = call(inner.clone(), Req { call: t, notes }).await;
            notes = served.notes;
            let Granted {
                tried: Tried { sent, record },
                pool: held,
                mut grant,
                retry_after,
            } = match served.result {
                Ok(granted) => granted,
                Err(f) => return Served::err(f, notes),
            };
            waited += record.sent - record.limiter_start;
            observe::attempt(&mut notes, &up, &record);
            // A model's buffered 200 is read here: one that is not an
            // answer fails like a 5xx.
            let sent = match sent {
                Ok(response) if plan.checks_answer && response.status().is_success() => {
                    match answer::check(response, up.deadline).await {
                        Checked::Answer(r) => Ok(r),
                        Checked::NotAnswer(why) => Err(NotAnswer(why)),
                        Checked::Timeout => {
                            refund_tokens(&mut grant, &up);
                            return Served::err(Failure::Timeout { attempts: attempt }, notes);
                        }
                    }
                }
                Ok(response) => Ok(response),
                Err(fault) => Err(Sent(fault)),
            };
            let wait = match sent {
                Err(NotAnswer(why)) => {
                    refund_tokens(&mut grant, &up);
                    tracing::warn!(
                        upstream = %plan.label,
                        model = %plan.name,
                        attempt,
                        "upstream answered 200 with {why}: an upstream error"
                    );
                    if attempt >= max_attempts {
                        let f = Failure::Upstream {
                            message: format!(
                                "upstream answered 200 with {why}, after {attempt} attempts"
                            ),
                            attempts: attempt,
                        };
                        return Served::err(f, notes);
                    }
                    Some(backoff(cfg, attempt))
                }
                Ok(response) => {
                    let status = response.status().as_u16();
                    let transient = status == 429 || status == 408 || status >= 500;
                    // A call that may not be sent again passes on
                    // whatever came.
                    if !transient || !plan.retryable {
                        let answered = Answered {
                            response,
                            grant,
                            pool: held,
                            attempts: attempt,
                            waited,
                        };
                        return Served::ok(answered, notes);
                    }
                    refund_tokens(&mut grant, &up);
                    if status == 429 {
                        if let Some(r) = retry_after {
                            observe::retry_after(r);
                        }
                        let too_long = retry_after
                            .is_some_and(|r| r > Duration::from_millis(cfg.max_retry_after_ms));
                        if attempt >= max_attempts || too_long {
                            let f = Failure::Throttled {
                                retry_after,
                                attempts: attempt,
                            };
                            return Served::err(f, notes);
                        }
                        // The limiter now pauses the resource for the
                        // Retry-After: the next acquire waits that long.
                        None
                    } else if attempt >= max_attempts {
                        let f = Failure::Upstream {
                            message: format!("upstream answered {status} after {attempt} attempts"),
                            attempts: attempt,
                        };
                        return Served::err(f, notes);
                    } else {
                        Some(backoff(cfg, attempt))
                    }
                }
                Err(Sent(Fault::Transport(e))) => {
                    refund_tokens(&mut grant, &up);
                    if attempt >= max_attempts {
                        let f = Failure::Upstream {
                            message: describe(&e),
                            attempts: attempt,
                        };
                        return Served::err(f, notes);
                    }
                    Some(backoff(cfg, attempt))
                }
                Err(Sent(Fault::Timeout)) => {
                    refund_tokens(&mut grant, &up);
                    if Instant::now() >= up.deadline || attempt >= max_attempts {
                        return Served::err(Failure::Timeout { attempts: attempt }, notes);
                    }
                    Some(backoff(cfg, attempt))
                }
            };
            drop(grant);
            pool = Some(held);
            observe::retry(&mut notes, plan, record.outcome);
            if let Some(wait) = wait {
                if Instant::now() + wait >= up.last_send(cfg) {
                    return Served::err(Failure::Timeout { attempts: attempt }, notes);
                }
                tokio::select! {
                    biased;
                    () = state.grace.over() => {
                        return Served::err(crate::state::Grace::ended(), notes);
                    }
                    () = tokio::time::sleep(wait) => {}
                }
            }
        }
    }
}

/// Why an attempt brought no answer to pass on.
enum NoAnswer {
    /// The attempt failed on its way.
    Sent(Fault),
    /// A 200 whose body is not an answer, and why.
    NotAnswer(String),
}

use NoAnswer::{NotAnswer, Sent};

/// Full jitter: uniform in [0, min(max, initial · 2^(attempt−1))].
pub(crate) fn backoff(cfg: &RetryConfig, attempt: u32) -> Duration {
    let exp = cfg
        .initial_backoff_ms
        .saturating_mul(1u64 << attempt.saturating_sub(1).min(30));
    let cap = exp.min(cfg.max_backoff_ms);
    Duration::from_millis(fastrand::u64(0..=cap))
}

/// A failed attempt used no tokens.
fn refund_tokens(grant: &mut sluice_limit::Permit, up: &Upstream) {
    if let Some(t) = &up.plan.tokens {
        let _ = grant.settle_part(t, 0);
    }
}

#[path = "retry/answer.rs"]
mod answer;

#[cfg(test)]
#[path = "retry/tests.rs"]
mod tests;
