//! Lanes: the way a thread's operations take to Redis.
//!
//! A limiter has one lane of its own: a batcher (`batch::run`) on the
//! runtime [`RedisLimiter::connect`](crate::RedisLimiter::connect) ran
//! on, calling Redis on the limiter's connection, whose I/O task runs
//! there too. A call made on another thread hands its operation over to
//! that runtime and waits for the answer to be handed back: two wake-ups
//! of another thread per decision, each tens to hundreds of µs on a
//! small VM when that thread is parked.
//!
//! A thread that runs a current-thread runtime for as long as it lives
//! (the gateway's serving threads) can ask for lanes of its own with
//! [`batch_on_this_thread`]: the first operation it sends to a limiter
//! starts a batcher on its runtime with a connection opened there, so
//! that its decisions go to Redis and come back on the thread that made
//! them. Batching is then per thread: concurrent decisions of one thread
//! share a script call, with up to `max_in_flight_calls` calls in flight
//! per lane.

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::batch::{self, Header, Op};
use crate::config::RedisConfig;
use crate::conn::{Conn, Own};
use crate::limiter::{Inner, lock};

/// Operations a lane holds before its batcher takes them: past this,
/// an answerless operation is dropped and a decision waits.
const DEPTH: usize = 65_536;

thread_local! {
    /// Whether this thread asked for lanes of its own.
    static OWN: Cell<bool> = const { Cell::new(false) };
    /// This thread's lanes, one per limiter it used.
    static LANES: RefCell<Vec<(Weak<Inner>, mpsc::Sender<Op>)>> =
        const { RefCell::new(Vec::new()) };
}

/// Makes the calls this thread makes to any [`RedisLimiter`]
/// (crate::RedisLimiter) go to Redis from this thread, on a batcher and
/// a connection of its own started on its runtime at its first call,
/// instead of being handed to the runtime the limiter was connected on
/// and back. For a thread that runs one current-thread runtime for as
/// long as it lives (a serving thread): a lane is kept per thread, and
/// stops with the limiter ([`RedisLimiter::close`](crate::RedisLimiter::close)
/// or its last clone dropped) or with the runtime. On a multi-thread
/// runtime, or outside any runtime, calls take the limiter's lane as
/// before.
pub fn batch_on_this_thread() {
    OWN.set(true);
}

/// Starts a batcher on the current runtime for `conn` (on a connection
/// of its own with `own`): its queue and its task.
pub(crate) fn start(
    conn: &Arc<Conn>,
    own: Option<Arc<Own>>,
    header: &Arc<Header>,
    cfg: &RedisConfig,
) -> (mpsc::Sender<Op>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(DEPTH);
    let task = tokio::spawn(batch::run(
        rx,
        conn.clone(),
        own,
        header.clone(),
        cfg.max_batch,
        cfg.max_in_flight_calls,
    ));
    (tx, task)
}

impl Inner {
    /// Where this thread's operations go: its own lane when it asked for
    /// lanes ([`batch_on_this_thread`]) and runs a current-thread runtime,
    /// the limiter's otherwise.
    pub(crate) fn lane(self: &Arc<Self>) -> mpsc::Sender<Op> {
        if !OWN.get() {
            return self.ops.clone();
        }
        // Past this thread's thread-locals' end (a grant dropped by another
        // one's destructor), the limiter's lane.
        let lane = LANES.try_with(|lanes| {
            let mut lanes = lanes.borrow_mut();
            // A lane whose limiter or runtime is gone is of no more use.
            lanes.retain(|(inner, tx)| inner.strong_count() > 0 && !tx.is_closed());
            let mine = Arc::as_ptr(self);
            if let Some((_, tx)) = lanes.iter().find(|(inner, _)| inner.as_ptr() == mine) {
                return tx.clone();
            }
            // Only a current-thread runtime runs its tasks on this thread.
            let here = Handle::try_current()
                .is_ok_and(|rt| rt.runtime_flavor() == RuntimeFlavor::CurrentThread);
            if !here || self.closed.load(Ordering::SeqCst) {
                return self.ops.clone();
            }
            let (tx, task) = start(&self.conn, Some(Arc::default()), &self.header, &self.cfg);
            {
                // Stopped with the limiter's other tasks (close, drop).
                let mut tasks = lock(&self.tasks);
                tasks.retain(|t| !t.is_finished());
                tasks.push(task);
            }
            lanes.push((Arc::downgrade(self), tx.clone()));
            tx
        });
        lane.unwrap_or_else(|_| self.ops.clone())
    }
}
