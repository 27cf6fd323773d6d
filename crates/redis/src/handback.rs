//! Coming back from `fail_open`. While Redis was away each replica spent
//! its local share (1/N of every limit); the shared state knows nothing of
//! it (a restarted Redis starts empty; one that stayed up refilled every
//! bucket meanwhile). Going straight back to it let the first replica to
//! reconnect spend a whole fresh burst on an upstream that the shares had
//! just emptied, while the others were still on their shares: 19–20
//! upstream 429s within half a second of the return (issue 34).
//!
//! So a replica whose connection is back stays on its share until two
//! things are done:
//! 1. **Meet**: the replicas switch together, at a moment the first of
//!    them marks in Redis [`MEET`] ahead (the longest a replica retrying
//!    in the background takes to notice Redis is back). A replica that is
//!    late switches at once.
//! 2. **Hand back**: each charges the shared bucket what its share spent
//!    and has not earned back (`burst − available` of every token bucket
//!    and GCRA of its share), as a settle above the reservation, so that
//!    the shared state starts where the upstream's own limit stands: the
//!    sum of what the shares have left.
//!
//! Sliding windows and in-flight slots are not handed back: a sliding
//! window's count cannot be charged without a request's member, and local
//! slots are given back locally as they end.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sluice_limit::Algorithm;
use tokio::sync::oneshot;

use crate::batch::{Kind, Op};
use crate::config::Failure;
use crate::conn::{HandBack, MAX_RECONNECT_BACKOFF};
use crate::limiter::Inner;

/// How long the first replica back waits for the others before they all
/// switch: the reconnection backoff's cap, plus one call's timeout (the
/// connection attempt), is the latest a replica retrying in the
/// background finds Redis back.
fn meet(inner: &Inner) -> Duration {
    MAX_RECONNECT_BACKOFF + inner.cfg.timeout
}

/// The hook the connection runs after each reconnection.
pub(crate) fn hook(weak: Weak<Inner>) -> HandBack {
    Arc::new(move || {
        let weak = weak.clone();
        Box::pin(async move {
            if let Some(inner) = weak.upgrade() {
                hand_back(&inner).await;
            }
        })
    })
}

async fn hand_back(inner: &Arc<Inner>) {
    // Failing closed, nothing was spent locally: shared again at once.
    if inner.cfg.failure == Failure::FailClosed {
        return;
    }
    let script = redis::Script::new(include_str!("../lua/handback.lua"));
    let mut inv = script.prepare_invoke();
    let wait = meet(inner);
    inv.key(format!("{}{{rl}}:returned", inner.cfg.prefix))
        .arg(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX));
    let until: Result<u64, _> = inner
        .conn
        .call(|mut c| async move { inv.invoke_async(&mut c).await })
        .await;
    let Ok(until) = until else {
        // Redis went again: the connection is down and reconnects.
        return;
    };
    tokio::time::sleep(Duration::from_millis(until).min(wait)).await;
    let mut answers = Vec::new();
    for cap in inner.local.capacities() {
        if !matches!(cap.algorithm, Algorithm::TokenBucket | Algorithm::Gcra) {
            continue;
        }
        let spent = (cap.burst as f64 - cap.available).ceil();
        if spent < 1.0 {
            continue;
        }
        let Ok(spec) = inner.spec(&cap.resource) else {
            continue;
        };
        let (tx, rx) = oneshot::channel();
        let op = Op {
            kind: Kind::Settle {
                spec,
                member: String::new(),
                reserved: 0,
                actual: spent as u64,
            },
            reply: Some(tx),
        };
        // Not `Inner::request`, which refuses while degraded: this
        // replica is, until the hand-back is done.
        if inner.lane().send(op).await.is_err() {
            return;
        }
        answers.push((cap.resource, spent, rx));
    }
    let mut handed = 0.0;
    for (resource, spent, rx) in answers {
        match rx.await {
            Ok(Ok(_)) => handed += spent,
            _ => {
                tracing::warn!(resource, "redis: handing back a local share failed");
                return;
            }
        }
    }
    if handed > 0.0 {
        tracing::info!(
            replica = %inner.cfg.replica_id,
            tokens = handed,
            "redis is back: the local shares handed back what they spent"
        );
    }
}
