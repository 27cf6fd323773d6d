//! Circuit state shared by replicas (with `[redis]`): a deployment whose
//! circuit one replica opens is open on every replica within the bus's
//! delay (milliseconds), and once its open time has passed only one
//! replica probes it. Each replica still counts its own failures in a
//! row (what opens a circuit is local evidence); what is shared is the
//! verdict. Redis keeps the marks (`sluice_redis`'s circuit marks, keys
//! of their own) so that a replica that starts, or whose bus reconnects,
//! reads the circuits open now.
//!
//! Marks are written in order by one task per gateway, fed by a bounded
//! queue, since a circuit changes where a call ends (a guard's drop),
//! which cannot wait for Redis. While Redis is away each replica's
//! circuits are its own, as without `[redis]`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_redis::{CIRCUIT_TOPIC, CircuitNotice, NoticeEvent, ProbeClaim, RedisLimiter};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::DeploymentState;
use super::circuit::CircuitState;

/// Marks waiting to be written: a circuit changes at most a few times a
/// second per deployment, so this many pending means Redis is stuck.
const QUEUE: usize = 256;

/// What the writer does next.
#[derive(Debug)]
enum Mark {
    Open(Arc<DeploymentState>),
    Close(Arc<DeploymentState>),
    Release(Arc<DeploymentState>),
    /// Reads every deployment's open mark (at start, after the bus was
    /// away).
    Read,
}

/// The shared side of every deployment's circuit (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct SharedCircuits {
    redis: RedisLimiter,
    marks: mpsc::Sender<Mark>,
}

impl SharedCircuits {
    /// Shares `deployments`' circuits through `redis`: listens for other
    /// replicas' marks and reads those open now. The writer stops when
    /// the last clone of the returned value is dropped.
    pub(crate) fn start(
        redis: RedisLimiter,
        deployments: Vec<Arc<DeploymentState>>,
    ) -> SharedCircuits {
        let (tx, rx) = mpsc::channel(QUEUE);
        let by_resource: HashMap<String, Arc<DeploymentState>> = deployments
            .iter()
            .map(|d| (d.resource.clone(), Arc::clone(d)))
            .collect();
        // A weak sender: the listener lives as long as the limiter, and
        // must not keep the writer alive after the gateway is gone.
        let weak = tx.downgrade();
        redis.on_notice(move |event| match event {
            NoticeEvent::Notice(n) if n.topic == CIRCUIT_TOPIC => {
                let Some(notice) = CircuitNotice::parse(&n.body) else {
                    tracing::warn!(replica = %n.agent_id, "ignoring a malformed circuit notice");
                    return;
                };
                if let Some(d) = by_resource.get(&notice.name) {
                    apply(d, notice.open_ms);
                }
            }
            NoticeEvent::Notice(_) => {}
            NoticeEvent::Resubscribed => {
                if let Some(tx) = weak.upgrade() {
                    let _ = tx.try_send(Mark::Read);
                }
            }
        });
        let _ = tx.try_send(Mark::Read);
        tokio::spawn(write(redis.clone(), deployments, rx));
        SharedCircuits { redis, marks: tx }
    }

    /// `d`'s circuit opened here.
    pub(crate) fn opened(&self, d: &Arc<DeploymentState>) {
        self.send(Mark::Open(Arc::clone(d)));
    }

    /// `d`'s circuit closed here (its probe was answered).
    pub(crate) fn closed(&self, d: &Arc<DeploymentState>) {
        self.send(Mark::Close(Arc::clone(d)));
    }

    /// This replica's probe of `d` ended without a verdict.
    pub(crate) fn released(&self, d: &Arc<DeploymentState>) {
        self.send(Mark::Release(Arc::clone(d)));
    }

    fn send(&self, mark: Mark) {
        if self.marks.try_send(mark).is_err() {
            tracing::warn!(
                "circuit marks are not reaching redis; this replica's circuits are its own until they do"
            );
        }
    }

    /// Whether this replica may probe `d`, whose open time it saw pass,
    /// for at most `ttl`. Redis away: yes (each replica probes for
    /// itself, as without `[redis]`).
    pub(crate) async fn claim(&self, d: &DeploymentState, ttl: Duration) -> ProbeClaim {
        self.redis
            .claim_probe(&d.resource, ttl)
            .await
            .unwrap_or(ProbeClaim::Granted)
    }
}

/// Another replica's mark on `d`: open for `open_ms` from now, or closed.
fn apply(d: &DeploymentState, open_ms: Option<u64>) {
    match open_ms {
        Some(ms) => d
            .circuit
            .open_until(Instant::now() + Duration::from_millis(ms)),
        None => d.circuit.close(),
    }
    let open = d.circuit.state(Instant::now()) != CircuitState::Closed;
    crate::metrics::pool_circuit(&d.pool, &d.resource, open);
}

/// Writes marks in the order they came; ends when every sender is gone.
async fn write(
    redis: RedisLimiter,
    deployments: Vec<Arc<DeploymentState>>,
    mut marks: mpsc::Receiver<Mark>,
) {
    while let Some(mark) = marks.recv().await {
        let done = match &mark {
            Mark::Open(d) => redis.open_circuit(&d.resource, d.circuit.open_time()).await,
            Mark::Close(d) => redis.close_circuit(&d.resource).await,
            Mark::Release(d) => redis.release_probe(&d.resource).await,
            Mark::Read => {
                let names: Vec<String> = deployments.iter().map(|d| d.resource.clone()).collect();
                redis.open_circuits(&names).await.map(|open| {
                    for (d, left) in deployments.iter().zip(open) {
                        if let Some(left) = left {
                            apply(d, Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)));
                        }
                    }
                })
            }
        };
        if let Err(e) = done {
            let (kind, deployment) = match &mark {
                Mark::Open(d) => ("open", d.resource.as_str()),
                Mark::Close(d) => ("close", d.resource.as_str()),
                Mark::Release(d) => ("release", d.resource.as_str()),
                Mark::Read => ("read", ""),
            };
            tracing::warn!(error = %e, kind, deployment, "a circuit mark was not written to redis");
        }
    }
}
