//! Leased mode: a replica takes a block of tokens from the shared bucket
//! and spends it locally until the block runs out or its TTL passes; what
//! is left then goes back. Blocks are sized to demand: doubled when one
//! runs dry before its TTL, shrunk to what was used when one expires.
//!
//! Tokens are taken from the shared bucket before they are spent, so the
//! shared bucket's bound (`rate · t + burst` over any `t`) holds for what
//! the replicas admit together; spending is only *delayed* by up to the
//! block TTL, so an upstream counting on its own clock can see at most
//! `rate · block_ttl` more in a window. See `docs/distributed.md`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::batch::{Kind, Op, Spec};
use crate::grant::{Held, RedisGrant};
use crate::limiter::{Inner, Refusal, lock};

#[derive(Debug, Default)]
pub(crate) struct Blocks {
    map: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Block>>>>,
}

#[derive(Debug)]
pub(crate) struct Block {
    spec: Arc<Spec>,
    tokens: u64,
    size: u64,
    expires: Instant,
    target: u64,
    last_used: Instant,
}

impl Block {
    /// Gives back what is left (the caller holds the block's lock).
    fn give_back(&mut self, inner: &Arc<Inner>) {
        if self.tokens > 0 {
            inner.send(Op {
                kind: Kind::Settle {
                    spec: self.spec.clone(),
                    member: String::new(),
                    reserved: self.tokens,
                    actual: 0,
                },
                reply: None,
            });
            self.tokens = 0;
        }
    }
}

impl Blocks {
    fn get(&self, spec: &Arc<Spec>) -> Arc<tokio::sync::Mutex<Block>> {
        let mut map = lock(&self.map);
        map.entry(spec.name.clone())
            .or_insert_with(|| {
                let now = Instant::now();
                Arc::new(tokio::sync::Mutex::new(Block {
                    spec: spec.clone(),
                    tokens: 0,
                    size: 0,
                    expires: now,
                    target: 1,
                    last_used: now,
                }))
            })
            .clone()
    }

    /// Capacity changed: what this replica holds of `resource` goes back.
    pub(crate) fn drop_block(&self, inner: &Arc<Inner>, resource: &str) {
        let b = lock(&self.map).get(resource).cloned();
        if let Some(b) = b
            && let Ok(mut b) = b.try_lock()
        {
            b.give_back(inner);
            b.target = 1;
        } else if let Some(b) = lock(&self.map).remove(resource) {
            // Busy: taken out of the map so nobody finds it again; its
            // tokens go back once its holder is done with it.
            let inner = inner.clone();
            tokio::spawn(async move {
                b.lock().await.give_back(&inner);
            });
        }
    }
}

/// The largest block for `spec`: what refills during one block TTL, and
/// no more than half the burst split among the replicas.
fn max_block(spec: &Spec, ttl: Duration, replicas: u64) -> u64 {
    let l = spec.limit;
    let refill = (l.capacity() as f64 * ttl.as_secs_f64() / l.window().as_secs_f64()).ceil();
    let share = l.effective_burst() / (2 * replicas.max(1));
    (refill as u64).min(share).max(1)
}

/// Takes `needs` from this replica's blocks, refilling a block from the
/// shared bucket where it runs short; `line` when the caller heads a line
/// of waiters already queued (see [`Kind::Lease`]).
pub(crate) async fn attempt(
    inner: &Arc<Inner>,
    needs: &[(Arc<Spec>, u64)],
    line: bool,
) -> Result<RedisGrant, Refusal> {
    let mut order: Vec<usize> = (0..needs.len()).collect();
    order.sort_by(|a, b| needs[*a].0.name.cmp(&needs[*b].0.name));
    let handles: Vec<_> = order
        .iter()
        .map(|i| inner.blocks.get(&needs[*i].0))
        .collect();
    let mut guards = Vec::with_capacity(handles.len());
    for h in &handles {
        guards.push(h.lock().await);
    }
    let now = Instant::now();
    let ttl = inner.cfg.block_ttl;
    let replicas = inner.replicas.load(std::sync::atomic::Ordering::Relaxed);
    for (k, i) in order.iter().enumerate() {
        let (spec, cost) = &needs[*i];
        let b = &mut guards[k];
        b.last_used = now;
        if now >= b.expires {
            // Expired with tokens left: demand was lower than the block.
            if b.tokens > 0 {
                b.target = b.size.saturating_sub(b.tokens).max(1);
                b.give_back(inner);
            }
        } else if b.tokens >= *cost {
            continue;
        } else {
            // Ran dry before its TTL: demand is higher than the block.
            b.target = b.target.saturating_mul(2);
            b.give_back(inner);
        }
        if b.tokens >= *cost {
            continue;
        }
        let want = b.target.min(max_block(spec, ttl, replicas)).max(*cost);
        let r = inner
            .request(Kind::Lease {
                spec: spec.clone(),
                want,
                min: *cost,
                weight: inner.weight(&spec.name),
                line,
                ahead_us: 0,
            })
            .await
            .map_err(|_| Refusal::Down)?;
        let got = u64::try_from(r[0]).unwrap_or(0);
        if got < *cost {
            // Nothing taken (the script takes at least `min` or nothing).
            drop(guards);
            return Err(inner.refused(&needs[*i..=*i], [0, r[1].max(1), 1, r[3]]));
        }
        b.tokens = got;
        b.size = got;
        b.expires = Instant::now() + ttl;
    }
    let mut parts = Vec::with_capacity(needs.len());
    for (k, i) in order.iter().enumerate() {
        let (spec, cost) = &needs[*i];
        guards[k].tokens -= cost;
        parts.push((*i, spec.clone(), *cost));
    }
    parts.sort_by_key(|p| p.0);
    Ok(RedisGrant {
        inner: inner.clone(),
        parts: parts
            .into_iter()
            .map(|(_, spec, cost)| Held {
                spec,
                reserved: cost,
                member: String::new(),
            })
            .collect(),
        local: None,
    })
}

/// Gives back expired blocks' tokens and forgets idle blocks.
pub(crate) fn spawn_sweeper(weak: Weak<Inner>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let every = match weak.upgrade() {
            Some(i) => (i.cfg.block_ttl / 2).max(Duration::from_millis(10)),
            None => return,
        };
        loop {
            tokio::time::sleep(every).await;
            let Some(inner) = weak.upgrade() else { return };
            let now = Instant::now();
            let idle = inner.cfg.block_ttl * 20;
            let blocks: Vec<_> = lock(&inner.blocks.map).values().cloned().collect();
            for b in blocks {
                if let Ok(mut b) = b.try_lock()
                    && now >= b.expires
                {
                    if b.tokens > 0 {
                        b.target = b.size.saturating_sub(b.tokens).max(1);
                    }
                    b.give_back(&inner);
                }
            }
            lock(&inner.blocks.map).retain(|_, b| {
                b.try_lock()
                    .map_or(true, |b| now.saturating_duration_since(b.last_used) < idle)
            });
        }
    })
}
