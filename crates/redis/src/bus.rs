//! The capacity bus: Redis pub/sub on `{prefix}ratelimit.capacity`
//! carrying [`CapacityUpdate`]s, and `{prefix}ratelimit.release` carrying
//! the names of resources whose in-flight slots came back (to wake
//! waiters without polling).
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

pub(crate) fn spawn(weak: Weak<Inner>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(50);
        loop {
            let (client, channels) = match weak.upgrade() {
                Some(i) => (
                    i.conn.client().clone(),
                    [
                        i.keys.capacity_channel.clone(),
                        i.keys.release_channel.clone(),
                    ],
                ),
                None => return,
            };
            if let Ok(mut ps) = client.get_async_pubsub().await
                && ps.subscribe(&channels).await.is_ok()
            {
                backoff = Duration::from_millis(50);
                let mut stream = ps.into_on_message();
                while let Some(msg) = stream.next().await {
                    let Some(inner) = weak.upgrade() else { return };
                    let payload: String = msg.get_payload().unwrap_or_default();
                    if msg.get_channel_name() == channels[1] {
                        inner.wake(&payload);
                    } else {
                        receive(&inner, &payload);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
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
    });
}

/// `secs.micros` since the epoch as RFC 3339 (UTC, microseconds).
pub(crate) fn rfc3339(secs: i64, micros: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(rfc3339(1_795_430_096, 5), "2026-11-23T10:34:56.000005Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000000Z");
    }
}
