//! Notices: small messages replicas send each other on the bus's third
//! channel, `{prefix}notices`, for what is not capacity — such as "key
//! `ab12…` was revoked, drop it from your cache". Each carries a topic
//! (who it is for) and a body; a replica never receives its own. After
//! the bus reconnects, listeners hear [`NoticeEvent::Resubscribed`]: the
//! notices sent while it was away are lost, so what they would have
//! invalidated must be invalidated whole.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::limiter::{Inner, RedisLimiter, lock};

/// One notice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    /// Who it is for (`keys`).
    pub topic: String,
    /// What it says, as its topic defines.
    pub body: String,
    /// The replica that sent it.
    pub agent_id: String,
}

/// What a notice listener hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoticeEvent {
    /// A notice from another replica.
    Notice(Notice),
    /// The bus was away and is back: notices may have been missed.
    Resubscribed,
}

pub(crate) type NoticeListener = std::sync::Arc<dyn Fn(&NoticeEvent) + Send + Sync>;

impl RedisLimiter {
    /// Calls `f` for every notice from another replica, and after the bus
    /// reconnects.
    pub fn on_notice(&self, f: impl Fn(&NoticeEvent) + Send + Sync + 'static) {
        lock(&self.inner.notice_listeners).push(std::sync::Arc::new(f));
    }

    /// Sends `body` under `topic` to every other replica.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis cannot be reached within the
    /// configured timeout.
    pub async fn publish_notice(&self, topic: &str, body: &str) -> Result<(), Error> {
        let notice = Notice {
            topic: topic.to_owned(),
            body: body.to_owned(),
            agent_id: self.inner.cfg.replica_id.clone(),
        };
        let json = serde_json::to_string(&notice).unwrap_or_default();
        let channel = self.inner.keys.notice_channel.clone();
        self.inner
            .conn
            .call(|mut c| async move {
                redis::cmd("PUBLISH")
                    .arg(channel)
                    .arg(json)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        Ok(())
    }
}

impl Inner {
    pub(crate) fn noticed(&self, event: &NoticeEvent) {
        let ls = lock(&self.notice_listeners).clone();
        for l in ls {
            l(event);
        }
    }
}

/// Applies one message from the notice channel.
pub(crate) fn receive(inner: &Inner, payload: &str) {
    match serde_json::from_str::<Notice>(payload) {
        Ok(n) if n.agent_id == inner.cfg.replica_id => {}
        Ok(n) => inner.noticed(&NoticeEvent::Notice(n)),
        Err(e) => tracing::warn!(error = %e, "ignoring a malformed notice"),
    }
}
