//! The capacity bus: Redis pub/sub on `{prefix}ratelimit.capacity`
//! carrying [`CapacityUpdate`]s, and `{prefix}ratelimit.release` carrying
//! the names of resources whose in-flight slots came back (to wake
//! waiters without polling), and `{prefix}notices` carrying
//! [`Notice`](crate::Notice)s between replicas (see [`crate::notice`]).
//!
//! The shared capacity itself lives in Redis, so every replica's next
//! decision already sees a reduction; the bus tells replicas to drop what
//! they believed locally (leased blocks, deny cache) and calls monitoring
//! callbacks. Rules, from the seed: ignore your own messages, only ever
//! reduce (an update at or above the configured capacity is ignored),
//! ignore resources you have no rule for.

use std::sync::Weak;
use std::time::Duration;

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use sluice_limit::{CapacityChange, ChangeReason};
use tokio::task::JoinHandle;

use crate::limiter::Inner;

/// A replica announcing that a resource's capacity was reduced (the seed's
/// `CapacityUpdate`, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityUpdate {
    /// The resource.
    pub resource: String,
    /// The replica that sent it.
    pub agent_id: String,
    /// The capacity per window now in force.
    pub new_capacity: u64,
    /// Why.
    pub reason: String,
    /// When, RFC 3339 in UTC, on Redis's clock.
    pub timestamp: String,
}

/// Subscribes and serves the bus until the limiter is gone; `ready` is
/// told once the first subscription stands.
pub(crate) fn spawn(weak: Weak<Inner>, ready: tokio::sync::oneshot::Sender<()>) -> JoinHandle<()> {
    let mut ready = Some(ready);
    let mut subscribed_before = false;
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            let (client, channels) = match weak.upgrade() {
                Some(i) => (
                    i.conn.client().clone(),
                    [
                        i.keys.capacity_channel.clone(),
                        i.keys.release_channel.clone(),
                        i.keys.notice_channel.clone(),
                    ],
                ),
                None => return,
            };
            if let Ok(mut ps) = client.get_async_pubsub().await
                && ps.subscribe(&channels).await.is_ok()
            {
                backoff = Duration::from_millis(50);
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                // Notices sent while the bus was away are lost: listeners
                // must drop whatever those could have invalidated.
                if std::mem::replace(&mut subscribed_before, true)
                    && let Some(inner) = weak.upgrade()
                {
                    inner.noticed(&crate::NoticeEvent::Resubscribed);
                }
                let mut stream = ps.into_on_message();
                while let Some(msg) = stream.next().await {
                    let Some(inner) = weak.upgrade() else { return };
                    let payload: String = msg.get_payload().unwrap_or_default();
                    if msg.get_channel_name() == channels[1] {
                        inner.wake(&payload);
                    } else if msg.get_channel_name() == channels[2] {
                        crate::notice::receive(&inner, &payload);
                    } else {
                        receive(&inner, &payload);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(crate::conn::MAX_RECONNECT_BACKOFF);
        }
    })
}

/// Applies one message from the capacity channel.
pub(crate) fn receive(inner: &std::sync::Arc<Inner>, payload: &str) {
    let update: CapacityUpdate = match serde_json::from_str(payload) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring a malformed capacity update");
            return;
        }
    };
    if update.agent_id == inner.cfg.replica_id {
        return;
    }
    let Some(limit) = inner.rules.resolve(&update.resource) else {
        return;
    };
    if update.new_capacity >= limit.capacity() {
        return;
    }
    inner.forget(&update.resource);
    inner.updated(&update);
    inner.changed(&CapacityChange {
        resource: update.resource.clone(),
        previous: limit.capacity(),
        capacity: update.new_capacity,
        configured: limit.capacity(),
        window: limit.window(),
        reason: ChangeReason::Throttled,
        at: std::time::Instant::now(),
        announced_by: Some(update.agent_id.clone()),
    });
}
