//! One connection to Redis, opened on first use and dropped when it
//! breaks, for the response cache and the budgets: after a failure, calls
//! fail fast for [`RECONNECT_AFTER`] before a new connection is tried, so
//! that a request never waits on a Redis that is away for longer than
//! one call's timeout once per that period.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisResult};
use sluice_limit::Clock;

/// After a failed call, how long calls fail fast before a new connection
/// is tried.
pub const RECONNECT_AFTER: Duration = Duration::from_millis(500);

struct State {
    conn: Option<MultiplexedConnection>,
    /// No new connection is tried before this, after a failure.
    retry_at: Option<Instant>,
}

/// See the module doc.
pub(crate) struct RedisLink {
    client: redis::Client,
    state: Mutex<State>,
    timeout: Duration,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisLink {
    /// A link to `url` whose calls take at most `timeout`.
    ///
    /// # Errors
    /// Redis's error when `url` cannot be parsed.
    pub(crate) fn new(url: &str, timeout: Duration, clock: Arc<dyn Clock>) -> RedisResult<Self> {
        Ok(RedisLink {
            client: redis::Client::open(url)?,
            state: Mutex::new(State {
                conn: None,
                retry_at: None,
            }),
            timeout,
            clock,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn open(&self) -> RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(100))))
            .set_response_timeout(Some(self.timeout));
        self.client
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }

    /// Connects (if not connected) and checks that Redis answers.
    ///
    /// # Errors
    /// Redis's error when it cannot be reached.
    pub(crate) async fn ping(&self) -> RedisResult<()> {
        let mut c = self.open().await?;
        redis::cmd("PING").query_async::<()>(&mut c).await?;
        self.lock().conn = Some(c);
        Ok(())
    }

    /// The connection, opened if need be; `None` while failing fast.
    async fn conn(&self) -> Option<MultiplexedConnection> {
        {
            let link = self.lock();
            if let Some(c) = &link.conn {
                return Some(c.clone());
            }
            if link.retry_at.is_some_and(|at| self.clock.now() < at) {
                return None;
            }
        }
        match self.open().await {
            Ok(c) => {
                let mut link = self.lock();
                link.retry_at = None;
                Some(link.conn.get_or_insert(c).clone())
            }
            Err(_) => {
                self.lock().retry_at = Some(self.clock.now() + RECONNECT_AFTER);
                None
            }
        }
    }

    /// Runs `call` on the connection; `None` when it failed (or Redis is
    /// being failed fast). A failure that says the connection is broken
    /// drops it for a new one later.
    pub(crate) async fn call<T, F>(
        &self,
        call: impl FnOnce(MultiplexedConnection) -> F,
    ) -> Option<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let conn = self.conn().await?;
        match call(conn).await {
            Ok(v) => Some(v),
            Err(e) => {
                if e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_unrecoverable_error()
                {
                    let mut link = self.lock();
                    link.conn = None;
                    link.retry_at = Some(self.clock.now() + RECONNECT_AFTER);
                }
                None
            }
        }
    }
}
