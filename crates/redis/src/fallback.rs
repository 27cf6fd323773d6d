//! Heartbeats: each replica says it is alive every `heartbeat`; the count
//! of replicas seen within three heartbeats sets the local share (1/N)
//! that a replica limits on while Redis is away and the limiter fails
//! open. The heartbeat is also what notices a dead Redis on an idle
//! replica.

use std::sync::Weak;
use std::sync::atomic::Ordering;

use tokio::task::JoinHandle;

use crate::limiter::{Inner, lock, share, share_limit};

pub(crate) async fn spawn_heartbeat(weak: Weak<Inner>) -> JoinHandle<()> {
    // One beat now, so the count is known before the first request.
    if let Some(inner) = weak.upgrade() {
        beat(&inner).await;
    }
    tokio::spawn(async move {
        let every = match weak.upgrade() {
            Some(i) => i.cfg.heartbeat,
            None => return,
        };
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            beat(&inner).await;
        }
    })
}

async fn beat(inner: &std::sync::Arc<Inner>) {
    let script = redis::Script::new(include_str!("../lua/heartbeat.lua"));
    let mut inv = script.prepare_invoke();
    let window = u64::try_from(inner.cfg.heartbeat.as_millis() * 3).unwrap_or(u64::MAX);
    inv.key(&inner.keys.replicas)
        .arg(&inner.cfg.replica_id)
        .arg(window);
    let n: Result<u64, _> = inner
        .conn
        .call(|mut c| async move { inv.invoke_async(&mut c).await })
        .await;
    if let Ok(n) = n {
        let n = n.max(1);
        // Back from an outage and still on the shares (`handback.rs`): a
        // restarted Redis has seen only the replicas that beat since, and
        // a share grown on that count would spend what is not there.
        if inner.conn.is_degraded() && n < inner.replicas.load(Ordering::Relaxed) {
            return;
        }
        if inner.replicas.swap(n, Ordering::Relaxed) != n {
            let _ = inner.local.set_rules(share(&inner.rules, n));
            // Limits set at run time are the local limiter's own, kept
            // across new rules: give them the new share too.
            let set: Vec<_> = lock(&inner.overrides)
                .iter()
                .map(|(r, l)| (r.clone(), *l))
                .collect();
            for (resource, limit) in set {
                let _ = inner.local.set_limit(&resource, share_limit(limit, n));
            }
        }
    }
}
