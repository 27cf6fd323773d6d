//! Circuit marks: a circuit breaker's state shared by replicas, so that
//! a deployment one replica found failing is avoided by all of them, and
//! only one replica at a time probes it once its open time has passed.
//!
//! The breaker itself (failures in a row, half-open probes) is the
//! caller's; this module keeps its marks in Redis, under keys of their
//! own beside the limiter's:
//! - `{prefix}{circuit}:{name}`: present while the circuit is open, with
//!   the open time as its TTL, so that a replica that starts or whose
//!   bus reconnects reads what it missed ([`RedisLimiter::open_circuits`]);
//! - `{prefix}{circuit}:{name}:probe`: the replica probing it, for at
//!   most the probe's TTL (a replica that dies mid-probe hands it on);
//! - notices under [`CIRCUIT_TOPIC`] ([`CircuitNotice`]) tell the other
//!   replicas at once when it opens or closes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::limiter::RedisLimiter;

/// The notice topic of circuit changes.
pub const CIRCUIT_TOPIC: &str = "circuit";

/// The longest circuit name accepted (names are the caller's resources).
pub const MAX_CIRCUIT_NAME: usize = 512;

/// A circuit change as it travels on the bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CircuitNotice {
    /// The circuit.
    pub name: String,
    /// Open for this long from now, or closed when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_ms: Option<u64>,
}

impl CircuitNotice {
    /// Reads a notice's body; `None` for one that is not a circuit
    /// change or names a circuit longer than [`MAX_CIRCUIT_NAME`].
    #[must_use]
    pub fn parse(body: &str) -> Option<CircuitNotice> {
        serde_json::from_str::<CircuitNotice>(body)
            .ok()
            .filter(|n| n.name.len() <= MAX_CIRCUIT_NAME)
    }
}

/// The answer to [`RedisLimiter::claim_probe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeClaim {
    /// This replica probes the circuit.
    Granted,
    /// Another replica opened it again: open for this long still.
    Open(Duration),
    /// Another replica probes it, for this long at most.
    Probing(Duration),
}

/// Takes the probe unless the circuit is open or another replica holds
/// it. KEYS: open mark, probe mark; ARGV: this replica, probe TTL (ms).
const CLAIM: &str = r"
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return {1, open} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, 0} end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return {0, 0}
end
return {2, math.max(redis.call('PTTL', KEYS[2]), 1)}
";

/// Gives the probe back if this replica holds it. KEYS: probe mark;
/// ARGV: this replica.
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
";

fn check(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_CIRCUIT_NAME {
        return Err(Error::InvalidConfig {
            key: "circuit name",
            reason: format!("must be 1 to {MAX_CIRCUIT_NAME} bytes"),
        });
    }
    Ok(())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisLimiter {
    fn circuit_key(&self, name: &str) -> String {
        format!("{}{{circuit}}:{name}", self.inner.cfg.prefix)
    }

    fn probe_key(&self, name: &str) -> String {
        format!("{}{{circuit}}:{name}:probe", self.inner.cfg.prefix)
    }

    /// Marks circuit `name` open for `open` on every replica (and gives
    /// back any probe of it), then tells the others.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when Redis does not answer in time;
    /// [`Error::InvalidConfig`] for an empty or too long name.
    pub async fn open_circuit(&self, name: &str, open: Duration) -> Result<(), Error> {
        check(name)?;
        let (key, probe, open_ms) = (self.circuit_key(name), self.probe_key(name), ms(open));
        self.inner
            .conn
            .call(|mut c| async move {
                redis::pipe()
                    .atomic()
                    .cmd("SET")
                    .arg(&key)
                    .arg(1)
                    .arg("PX")
                    .arg(open_ms)
                    .ignore()
                    .cmd("DEL")
                    .arg(&probe)
                    .ignore()
                    .query_async::<()>(&mut c)
                    .await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        self.announce(CircuitNotice {
            name: name.to_owned(),
            open_ms: Some(open_ms),
        })
        .await
    }

    /// Marks circuit `name` closed on every replica, then tells the
    /// others.
    ///
    /// # Errors
    /// As [`RedisLimiter::open_circuit`].
    pub async fn close_circuit(&self, name: &str) -> Result<(), Error> {
        check(name)?;
        let (key, probe) = (self.circuit_key(name), self.probe_key(name));
        self.inner
            .conn
            .call(|mut c| async move {
                redis::cmd("DEL")
                    .arg(&key)
                    .arg(&probe)
                    .query_async::<i64>(&mut c)
                    .await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        self.announce(CircuitNotice {
            name: name.to_owned(),
            open_ms: None,
        })
        .await
    }

    async fn announce(&self, notice: CircuitNotice) -> Result<(), Error> {
        let body = serde_json::to_string(&notice).unwrap_or_default();
        self.publish_notice(CIRCUIT_TOPIC, &body).await
    }

    /// Asks to probe circuit `name` (whose open time this replica saw
    /// pass) for at most `ttl`: granted unless another replica opened it
    /// again or probes it.
    ///
    /// # Errors
    /// As [`RedisLimiter::open_circuit`].
    pub async fn claim_probe(&self, name: &str, ttl: Duration) -> Result<ProbeClaim, Error> {
        check(name)?;
        let (key, probe) = (self.circuit_key(name), self.probe_key(name));
        let (me, ttl_ms) = (self.inner.cfg.replica_id.clone(), ms(ttl));
        let (kind, wait): (i64, i64) = self
            .inner
            .conn
            .call(|mut c| async move {
                redis::Script::new(CLAIM)
                    .key(&key)
                    .key(&probe)
                    .arg(&me)
                    .arg(ttl_ms)
                    .invoke_async(&mut c)
                    .await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(1).max(1));
        Ok(match kind {
            0 => ProbeClaim::Granted,
            1 => ProbeClaim::Open(wait),
            _ => ProbeClaim::Probing(wait),
        })
    }

    /// Gives back this replica's probe of circuit `name` (it proved
    /// nothing), so that another may probe at once.
    ///
    /// # Errors
    /// As [`RedisLimiter::open_circuit`].
    pub async fn release_probe(&self, name: &str) -> Result<(), Error> {
        check(name)?;
        let probe = self.probe_key(name);
        let me = self.inner.cfg.replica_id.clone();
        self.inner
            .conn
            .call(|mut c| async move {
                redis::Script::new(RELEASE)
                    .key(&probe)
                    .arg(&me)
                    .invoke_async::<i64>(&mut c)
                    .await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        Ok(())
    }

    /// How long each of `names` stays open still (`None`: closed), as
    /// Redis holds it: for a replica that starts, or whose bus was away.
    ///
    /// # Errors
    /// As [`RedisLimiter::open_circuit`].
    pub async fn open_circuits(&self, names: &[String]) -> Result<Vec<Option<Duration>>, Error> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        for n in names {
            check(n)?;
        }
        let keys: Vec<String> = names.iter().map(|n| self.circuit_key(n)).collect();
        let ttls: Vec<i64> = self
            .inner
            .conn
            .call(|mut c| async move {
                let mut pipe = redis::pipe();
                for k in &keys {
                    pipe.cmd("PTTL").arg(k);
                }
                pipe.query_async(&mut c).await
            })
            .await
            .map_err(|_| Error::Unavailable)?;
        Ok(ttls
            .into_iter()
            .map(|t| {
                u64::try_from(t)
                    .ok()
                    .filter(|t| *t > 0)
                    .map(Duration::from_millis)
            })
            .collect())
    }
}
