//! Batching: concurrent operations of one replica go to Redis together, in
//! one script call (up to `max_batch`), with several calls in flight on the
//! multiplexed connection. Under load a decision costs a fraction of a
//! round trip; alone it is still exactly one.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::Script;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::config::Keys;
use crate::conn::{Conn, Own, Unavailable};

/// A resource as the script sees it: its rule, resolved.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: String,
    pub(crate) limit: sluice_limit::Limit,
    /// The jitter margin this replica holds back on the resource (us; see
    /// `ops.lua`, "The jitter margin"): the configured one, widened after
    /// timing collisions and narrowed again as this replica's own limiter
    /// does it (`RedisLimiter::observe`).
    pub(crate) margin_us: AtomicU64,
}

impl Spec {
    pub(crate) fn new(name: String, limit: sluice_limit::Limit, margin_us: u64) -> Spec {
        Spec {
            name,
            limit,
            margin_us: AtomicU64::new(margin_us),
        }
    }

    pub(crate) fn algo(&self) -> u8 {
        match self.limit.kind() {
            sluice_limit::Algorithm::Gcra => 2,
            sluice_limit::Algorithm::SlidingWindow => 3,
            sluice_limit::Algorithm::InFlight => 4,
            _ => 1,
        }
    }

    /// Token buckets and GCRA can be leased in blocks.
    pub(crate) fn leasable(&self) -> bool {
        self.algo() <= 2
    }

    pub(crate) fn window_us(&self) -> u64 {
        u64::try_from(self.limit.window().as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// One part of an all-or-nothing take.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub(crate) spec: Arc<Spec>,
    pub(crate) cost: u64,
    pub(crate) member: String,
    /// This replica's weight on the resource (see `ops.lua`, "Fair
    /// shares").
    pub(crate) weight: u64,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Acquire(Vec<Part>),
    Lease {
        spec: Arc<Spec>,
        want: u64,
        min: u64,
        /// This replica's weight on the resource.
        weight: u64,
        /// Taken for waiters already queued in a line: their busy period
        /// goes on, so a bucket found full holds no margin again (see
        /// `ops.lua`, "The jitter margin").
        line: bool,
        /// Also reserve what comes due within this many µs (a line's
        /// lease, `ops.lua`): 0 takes only what the bucket holds.
        ahead_us: u64,
    },
    Settle {
        spec: Arc<Spec>,
        member: String,
        reserved: u64,
        actual: u64,
    },
    Release {
        spec: Arc<Spec>,
        member: String,
    },
    Renew {
        spec: Arc<Spec>,
        member: String,
    },
    Info {
        spec: Arc<Spec>,
    },
}

/// The script's four integers for one operation.
pub(crate) type Reply = [i64; 4];

#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) kind: Kind,
    pub(crate) reply: Option<oneshot::Sender<Result<Reply, Unavailable>>>,
}

/// What every call carries besides the operations.
#[derive(Debug)]
pub(crate) struct Header {
    pub(crate) keys: Keys,
    pub(crate) recovery_interval_us: u64,
    pub(crate) recovery_factor: f64,
    pub(crate) lease_ttl_ms: u64,
    /// The replica's id: its entry in each resource's fair shares.
    pub(crate) replica: String,
    /// The configured jitter margin, in µs: what each resource's
    /// [`Spec::margin_us`] starts at and never goes below.
    pub(crate) margin_us: u64,
}

pub(crate) fn ops_script() -> Script {
    Script::new(include_str!("../lua/ops.lua"))
}

/// Drains `rx` into script calls until every sender is gone, on the
/// lane's own connection `own` or the shared one.
pub(crate) async fn run(
    mut rx: mpsc::Receiver<Op>,
    conn: Arc<Conn>,
    own: Option<Arc<Own>>,
    header: Arc<Header>,
    max_batch: usize,
    in_flight: usize,
) {
    let script = Arc::new(ops_script());
    let calls = Arc::new(Semaphore::new(in_flight.max(1)));
    let max_batch = max_batch.max(1);
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        // Waiting for a free call slot lets more operations queue, so the
        // next call carries more of them: batches grow with load.
        let Ok(permit) = calls.clone().acquire_owned().await else {
            return;
        };
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let (conn, own, header, script) =
            (conn.clone(), own.clone(), header.clone(), script.clone());
        tokio::spawn(async move {
            let link = (&conn, own.as_deref());
            let mut lost = execute(batch, link, &header, &script).await;
            drop(permit);
            // Releases are idempotent and nobody waits for their answer: one
            // lost to a slow or restarting Redis is sent again a few times
            // before the slot is left to its lease TTL.
            let mut delay = Duration::from_millis(100);
            for _ in 0..RELEASE_RETRIES {
                if lost.is_empty() {
                    break;
                }
                tokio::time::sleep(delay).await;
                delay *= 2;
                lost = execute(lost, link, &header, &script).await;
            }
        });
    }
}

/// How many times a release lost with its call is sent again (after 0.1,
/// 0.2, 0.4, 0.8 and 1.6 s).
const RELEASE_RETRIES: usize = 5;

/// Runs `batch` in one script call and answers each operation; gives back
/// the releases the call lost (to be sent again).
async fn execute(
    batch: Vec<Op>,
    (conn, own): (&Arc<Conn>, Option<&Own>),
    header: &Header,
    script: &Script,
) -> Vec<Op> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut specs: Vec<Arc<Spec>> = Vec::new();
    for op in &batch {
        for spec in specs_of(&op.kind) {
            if !index.contains_key(spec.name.as_str()) {
                index.insert(spec.name.clone(), specs.len() + 1);
                specs.push(spec.clone());
            }
        }
    }
    let mut inv = script.prepare_invoke();
    for s in &specs {
        inv.key(header.keys.state(&s.name));
        inv.key(header.keys.adaptive(&s.name));
        inv.key(header.keys.fair(&s.name));
    }
    inv.arg(specs.len())
        .arg(header.recovery_interval_us)
        .arg(header.recovery_factor)
        .arg(&header.keys.release_channel)
        .arg(header.lease_ttl_ms)
        .arg(&header.replica);
    for s in &specs {
        inv.arg(s.algo())
            .arg(s.limit.capacity())
            .arg(s.window_us())
            .arg(s.limit.effective_burst())
            .arg(&s.name)
            .arg(s.margin_us.load(Ordering::Relaxed));
    }
    for op in &batch {
        match &op.kind {
            Kind::Acquire(parts) => {
                inv.arg("A").arg(parts.len());
                for p in parts {
                    inv.arg(index[p.spec.name.as_str()])
                        .arg(p.cost)
                        .arg(&p.member)
                        .arg(header.lease_ttl_ms)
                        .arg(p.weight);
                }
            }
            Kind::Lease {
                spec,
                want,
                min,
                weight,
                line,
                ahead_us,
            } => {
                inv.arg("L")
                    .arg(index[spec.name.as_str()])
                    .arg(*want)
                    .arg(*min)
                    .arg(*weight)
                    .arg(u8::from(*line))
                    .arg(*ahead_us);
            }
            Kind::Settle {
                spec,
                member,
                reserved,
                actual,
            } => {
                inv.arg("S")
                    .arg(index[spec.name.as_str()])
                    .arg(member)
                    .arg(*reserved)
                    .arg(*actual);
            }
            Kind::Release { spec, member } => {
                inv.arg("R").arg(index[spec.name.as_str()]).arg(member);
            }
            Kind::Renew { spec, member } => {
                inv.arg("N")
                    .arg(index[spec.name.as_str()])
                    .arg(member)
                    .arg(header.lease_ttl_ms);
            }
            Kind::Info { spec } => {
                inv.arg("I").arg(index[spec.name.as_str()]);
            }
        }
    }
    let out: Result<Vec<i64>, Unavailable> = conn
        .call_on(own, |mut c| async move { inv.invoke_async(&mut c).await })
        .await;
    match out {
        Ok(v) if v.len() == batch.len() * 4 => {
            for (op, r) in batch.into_iter().zip(v.chunks_exact(4)) {
                let mut reply = [r[0], r[1], r[2], r[3]];
                // A refusal names the batch's resource number; the caller
                // knows its parts by position.
                if let Kind::Acquire(parts) = &op.kind
                    && reply[0] == 0
                {
                    let pos = parts
                        .iter()
                        .position(|p| {
                            usize::try_from(reply[2]).ok()
                                == index.get(p.spec.name.as_str()).copied()
                        })
                        .unwrap_or(0);
                    reply[2] = pos as i64 + 1;
                }
                if let Some(tx) = op.reply {
                    let _ = tx.send(Ok(reply));
                }
            }
        }
        _ => {
            let mut lost = Vec::new();
            for op in batch {
                match op.reply {
                    Some(tx) => {
                        let _ = tx.send(Err(Unavailable));
                    }
                    None if matches!(op.kind, Kind::Release { .. }) => lost.push(op),
                    None => {}
                }
            }
            return lost;
        }
    }
    Vec::new()
}

fn specs_of(kind: &Kind) -> Vec<&Arc<Spec>> {
    match kind {
        Kind::Acquire(parts) => parts.iter().map(|p| &p.spec).collect(),
        Kind::Lease { spec, .. }
        | Kind::Settle { spec, .. }
        | Kind::Release { spec, .. }
        | Kind::Renew { spec, .. }
        | Kind::Info { spec } => vec![spec],
    }
}
