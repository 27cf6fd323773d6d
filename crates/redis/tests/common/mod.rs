//! Shared test helpers: the Redis that `scripts/test` starts, or one of a
//! test's own (for tests that kill and restart it).
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_limit::{AdaptiveConfig, Rules};
use sluice_redis::{Mode, RedisConfig, RedisLimiter};

/// The shared test Redis, or `None` (with a note) on a machine where
/// `scripts/test` did not set one up.
pub fn redis_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            eprintln!("note: SLUICE_TEST_REDIS_URL is not set; skipping (scripts/test sets it)");
            None
        }
    }
}

/// A key prefix no other test uses.
pub fn prefix() -> String {
    format!("t{:x}:", fastrand())
}

fn fastrand() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// A config for replica `id` under `prefix`.
pub fn config(url: &str, prefix: &str, id: &str, mode: Mode) -> RedisConfig {
    let mut c = RedisConfig::new(url);
    c.prefix = prefix.to_owned();
    c.replica_id = id.to_owned();
    c.mode = mode;
    c.timeout = Duration::from_millis(500);
    c.heartbeat = Duration::from_millis(200);
    c
}

/// Replica `id` limiting by `rules`.
pub async fn replica(cfg: RedisConfig, rules: Rules) -> RedisLimiter {
    RedisLimiter::connect(cfg, rules, AdaptiveConfig::default())
        .await
        .expect("limiter")
}

/// Polls `f` every 10 ms until it holds or `within` passes.
pub async fn eventually(within: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

/// A redis-server of the test's own, on a free port, killed on drop.
pub struct OwnRedis {
    pub port: u16,
    child: Option<Child>,
    bin: String,
}

impl OwnRedis {
    /// Starts one, or `None` (with a note) when `SLUICE_TEST_REDIS_SERVER`
    /// is not set.
    pub fn start() -> Option<OwnRedis> {
        let bin = match std::env::var("SLUICE_TEST_REDIS_SERVER") {
            Ok(b) if !b.is_empty() => b,
            _ => {
                eprintln!(
                    "note: SLUICE_TEST_REDIS_SERVER is not set; skipping (scripts/test sets it)"
                );
                return None;
            }
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut r = OwnRedis {
            port,
            child: None,
            bin,
        };
        r.restart();
        Some(r)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts it again on the same port (empty: no persistence).
    pub fn restart(&mut self) {
        let child = Command::new(&self.bin)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start on {}", self.port);
    }

    /// kill -9, and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGSTOP / SIGCONT: a Redis that stops answering without closing.
    pub fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.signal("-CONT");
        self.kill();
    }
}

/// A connection of its own to the test Redis, or `None` as
/// [`redis_url`].
pub async fn connection() -> Option<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(redis_url()?).expect("url");
    Some(
        client
            .get_multiplexed_async_connection()
            .await
            .expect("connect"),
    )
}

/// One call of `ops.lua` itself as replica `a` on one token bucket under
/// prefix `p` (its keys `{p}s`, `{p}a`, `{p}f`) of 1 a second, `burst`
/// and a jitter margin of `margin_us`, then `ops` (each operation's letter
/// and fields, as the script reads them): its reply.
pub async fn ops_on_bucket(
    c: &mut redis::aio::MultiplexedConnection,
    p: &str,
    burst: u32,
    margin_us: u64,
    ops: &[String],
) -> Vec<i64> {
    let script = redis::Script::new(include_str!("../../lua/ops.lua"));
    let mut call = script.prepare_invoke();
    call.key(format!("{p}s"))
        .key(format!("{p}a"))
        .key(format!("{p}f"))
        // R, recovery interval (us), factor, release channel, lease TTL
        // (ms), replica; the resource: algorithm (1 token bucket),
        // capacity, window (us), burst, name, margin (us).
        .arg(1)
        .arg(30_000_000)
        .arg(1.1)
        .arg(format!("{p}release"))
        .arg(30_000)
        .arg("a")
        .arg(1)
        .arg(1)
        .arg(1_000_000)
        .arg(burst)
        .arg("r")
        .arg(margin_us);
    for op in ops {
        call.arg(op);
    }
    call.invoke_async(c).await.expect("script")
}
