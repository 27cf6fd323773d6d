//! Grants held for callers of the limiter API (`POST /v1/limits/acquire`)
//! until they release them or their lease runs out.
//!
//! A grant belongs to the tenant that took it: its id is 128 random bits
//! (nothing to count up to or guess), and an id presented by another
//! tenant is as unknown as one never given. What a release may settle is
//! bounded: at most [`Holds::max_settle`] times what was reserved, and the
//! limiter itself never lets a bucket owe more than one window. An
//! upstream's answer may be reported once per grant, while it is held.
//!
//! Ids are this replica's: in distributed mode a release must reach the
//! replica that granted (the lease frees the grant otherwise).
//!
//! # Why not `moka`
//!
//! A held grant is a limiter slot, not a cached value: when its lease
//! runs out it must be released on the next sweep, where moka evicts
//! lazily (a lapsed grant would keep its in-flight slot until moka's
//! housekeeping runs); leases follow tokio's clock, so that tests pause
//! and advance it, where moka reads its own; and the per-tenant counts
//! and the once-per-grant report need the same lock as the table anyway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use sluice_limit::Permit;

/// The most grants held at once by one replica, over every tenant.
const MAX_HOLDS: usize = 100_000;

/// A held grant's id: 128 random bits, written as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct HoldId(u128);

impl HoldId {
    /// A fresh id from the operating system's random source.
    fn random() -> HoldId {
        let mut bytes = [0u8; 16];
        if getrandom::fill(&mut bytes).is_err() {
            // No OS randomness (never seen on the platforms we build for):
            // fall back to the process's seeded generator rather than fail
            // every acquire.
            bytes = fastrand::u128(..).to_le_bytes();
        }
        HoldId(u128::from_le_bytes(bytes))
    }

    /// Parses the form [`HoldId`]'s `Display` writes; `None` otherwise.
    pub(crate) fn parse(s: &str) -> Option<HoldId> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(s, 16).ok().map(HoldId)
    }
}

impl std::fmt::Display for HoldId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

/// Why a hold could not be taken or used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HoldError {
    /// Not held by this caller: never given, released, expired, or
    /// another tenant's.
    #[error("unknown grant {0}: released already, its lease expired, or it is not yours")]
    Unknown(String),
    /// The caller holds as many grants as it may.
    #[error("{tenant:?} holds {held} grants, the most limits_api.max_held_per_tenant allows")]
    TenantFull {
        /// The tenant.
        tenant: String,
        /// How many it holds.
        held: usize,
    },
    /// Every replica-wide slot is taken.
    #[error("this gateway holds {0} grants for the limiter API, its most")]
    Full(usize),
    /// The grant's answer was reported already.
    #[error("grant {0} has had its report already: one per grant")]
    Reported(String),
}

struct Hold {
    owner: Arc<str>,
    resource: String,
    reserved: u64,
    grant: Permit,
    reported: bool,
    until: Instant,
}

/// The grants held for the limiter API.
pub(crate) struct Holds {
    state: Mutex<State>,
    max_per_tenant: usize,
    max_settle: u64,
}

#[derive(Default)]
struct State {
    held: HashMap<HoldId, Hold>,
    per_tenant: HashMap<Arc<str>, usize>,
}

impl std::fmt::Debug for Holds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holds")
            .field("held", &self.lock().held.len())
            .field("max_per_tenant", &self.max_per_tenant)
            .field("max_settle", &self.max_settle)
            .finish()
    }
}

/// What a release did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Released {
    /// The cost the grant was settled at (the reserved one if none was
    /// given), after the bound.
    pub(crate) settled: u64,
    /// Whether the cost asked for was above the bound and cut to it.
    pub(crate) clamped: bool,
}

impl Holds {
    /// Holds with these bounds: grants per tenant, and the multiple of the
    /// reserved cost a release may settle at.
    pub(crate) fn new(max_per_tenant: usize, max_settle: u64) -> Holds {
        Holds {
            state: Mutex::default(),
            max_per_tenant: max_per_tenant.max(1),
            max_settle: max_settle.max(1),
        }
    }

    /// The most a grant that reserved `reserved` may settle at.
    pub(crate) fn max_settle(&self, reserved: u64) -> u64 {
        reserved.saturating_mul(self.max_settle)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `owner` may take another grant (checked before waiting for
    /// one, so a full tenant does not queue for nothing).
    pub(crate) fn check(&self, owner: &str) -> Result<(), HoldError> {
        let st = self.lock();
        let held = st.per_tenant.get(owner).copied().unwrap_or(0);
        if held >= self.max_per_tenant {
            return Err(HoldError::TenantFull {
                tenant: owner.to_owned(),
                held,
            });
        }
        Ok(())
    }

    /// Keeps `grant` (on `resource`, `reserved`) for `owner` for `ttl`.
    pub(crate) fn hold(
        &self,
        owner: &Arc<str>,
        resource: String,
        reserved: u64,
        grant: Permit,
        ttl: Duration,
    ) -> Result<HoldId, HoldError> {
        let now = Instant::now();
        let mut expired = Vec::new();
        let mut st = self.lock();
        if st.held.len() >= MAX_HOLDS {
            // Full: make room from the expired before refusing.
            expired = st.expire(now);
        }
        let held = st.per_tenant.get(owner).copied().unwrap_or(0);
        let refused = if held >= self.max_per_tenant {
            Some(HoldError::TenantFull {
                tenant: owner.to_string(),
                held,
            })
        } else if st.held.len() >= MAX_HOLDS {
            Some(HoldError::Full(MAX_HOLDS))
        } else {
            None
        };
        if let Some(e) = refused {
            drop(st);
            drop(expired);
            return Err(e);
        }
        let mut id = HoldId::random();
        while st.held.contains_key(&id) {
            id = HoldId::random();
        }
        *st.per_tenant.entry(owner.clone()).or_insert(0) += 1;
        st.held.insert(
            id,
            Hold {
                owner: owner.clone(),
                resource,
                reserved,
                grant,
                reported: false,
                until: now + ttl,
            },
        );
        drop(st);
        // Expired grants are released outside the lock.
        drop(expired);
        Ok(id)
    }

    /// Releases `owner`'s grant `id`, settled first at `actual` (at most
    /// [`Holds::max_settle`] of what it reserved) when given.
    pub(crate) fn release(
        &self,
        owner: &str,
        id: HoldId,
        actual: Option<u64>,
    ) -> Result<Released, HoldError> {
        let mut hold = {
            let mut st = self.lock();
            st.take(owner, id, Instant::now())
                .ok_or_else(|| HoldError::Unknown(id.to_string()))?
        };
        let mut done = Released {
            settled: hold.reserved,
            clamped: false,
        };
        if let Some(actual) = actual {
            let most = self.max_settle(hold.reserved);
            done = Released {
                settled: actual.min(most),
                clamped: actual > most,
            };
            // Only the resource's part: the key's own limits taken with it
            // stay at what they reserved.
            if hold
                .grant
                .settle_part(&hold.resource, done.settled)
                .is_err()
            {
                hold.grant.settle(done.settled);
            }
        }
        // Dropping the grant releases it (in-flight slots come back).
        drop(hold);
        Ok(done)
    }

    /// Marks `owner`'s held grant `id` as reported and says what it holds.
    pub(crate) fn report(&self, owner: &str, id: HoldId) -> Result<String, HoldError> {
        let now = Instant::now();
        let mut st = self.lock();
        let hold = st
            .held
            .get_mut(&id)
            .filter(|h| &*h.owner == owner && h.until > now)
            .ok_or_else(|| HoldError::Unknown(id.to_string()))?;
        if hold.reported {
            return Err(HoldError::Reported(id.to_string()));
        }
        hold.reported = true;
        Ok(hold.resource.clone())
    }

    /// Drops (so releases) the grants whose lease has run out; called every
    /// second by the gateway.
    pub(crate) fn expire(&self) {
        let expired = self.lock().expire(Instant::now());
        drop(expired);
    }

    /// Grants held by `owner`.
    #[cfg(test)]
    fn held_by(&self, owner: &str) -> usize {
        self.lock().per_tenant.get(owner).copied().unwrap_or(0)
    }
}

impl State {
    /// Takes `owner`'s unexpired hold `id` out of the table.
    fn take(&mut self, owner: &str, id: HoldId, now: Instant) -> Option<Hold> {
        match self.held.get(&id) {
            Some(h) if &*h.owner == owner => {}
            // Another tenant's grant stays where it is, untouched.
            _ => return None,
        }
        let hold = self.held.remove(&id)?;
        self.forget(&hold.owner);
        (hold.until > now).then_some(hold)
    }

    fn forget(&mut self, owner: &Arc<str>) {
        if let Some(n) = self.per_tenant.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                self.per_tenant.remove(owner);
            }
        }
    }

    /// Takes the expired holds out; the caller drops them after unlocking.
    fn expire(&mut self, now: Instant) -> Vec<Hold> {
        let ids: Vec<HoldId> = self
            .held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(id, _)| *id)
            .collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(h) = self.held.remove(&id) {
                self.forget(&h.owner);
                out.push(h);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_limit::{Limit, Limiter, Rules};

    fn limiter() -> Limiter {
        Limiter::new(
            Rules::new()
                .exact("r", Limit::per_second(10))
                .exact("slots", Limit::in_flight(2)),
        )
        .unwrap()
    }

    fn grant(l: &Limiter, resource: &str, cost: u64) -> Permit {
        l.try_acquire(resource, cost).unwrap().into()
    }

    const TTL: Duration = Duration::from_secs(60);

    #[test]
    fn ids_are_random_and_round_trip() {
        let a = HoldId::random();
        let b = HoldId::random();
        assert_ne!(a, b);
        assert_eq!(HoldId::parse(&a.to_string()), Some(a));
        for bad in ["1", "", &"g".repeat(32), &"0".repeat(33)] {
            assert_eq!(HoldId::parse(bad), None, "{bad}");
        }
    }

    #[tokio::test]
    async fn a_grant_is_its_owners_only() {
        let l = limiter();
        let holds = Holds::new(10, 2);
        let acme: Arc<str> = Arc::from("acme");
        let id = holds
            .hold(&acme, "slots".into(), 1, grant(&l, "slots", 1), TTL)
            .unwrap();
        assert_eq!(
            holds.release("globex", id, Some(1_000_000)),
            Err(HoldError::Unknown(id.to_string()))
        );
        assert_eq!(
            holds.report("globex", id),
            Err(HoldError::Unknown(id.to_string()))
        );
        // Still held: globex's attempt changed nothing.
        assert_eq!(l.get_capacity("slots").unwrap().in_flight, 1);
        assert_eq!(holds.report("acme", id).as_deref(), Ok("slots"));
        assert_eq!(
            holds.report("acme", id),
            Err(HoldError::Reported(id.to_string()))
        );
        let done = holds.release("acme", id, None).unwrap();
        assert_eq!((done.settled, done.clamped), (1, false));
        assert_eq!(l.get_capacity("slots").unwrap().in_flight, 0);
        assert!(holds.release("acme", id, None).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn settling_is_bounded_by_the_reserved_cost() {
        let l = limiter();
        let holds = Holds::new(10, 2);
        let acme: Arc<str> = Arc::from("acme");
        let id = holds
            .hold(&acme, "r".into(), 3, grant(&l, "r", 3), TTL)
            .unwrap();
        let done = holds.release("acme", id, Some(u64::MAX)).unwrap();
        assert_eq!((done.settled, done.clamped), (6, true));
        assert_eq!(l.get_capacity("r").unwrap().available, 4.0);
    }

    #[tokio::test]
    async fn a_tenant_holds_at_most_its_share() {
        let l = Limiter::new(Rules::new().exact("r", Limit::per_second(100))).unwrap();
        let holds = Holds::new(2, 2);
        let acme: Arc<str> = Arc::from("acme");
        let globex: Arc<str> = Arc::from("globex");
        for _ in 0..2 {
            holds
                .hold(&acme, "r".into(), 1, grant(&l, "r", 1), TTL)
                .unwrap();
        }
        assert!(matches!(
            holds.check("acme"),
            Err(HoldError::TenantFull { .. })
        ));
        let refused = holds.hold(&acme, "r".into(), 1, grant(&l, "r", 1), TTL);
        assert!(matches!(
            refused,
            Err(HoldError::TenantFull { held: 2, .. })
        ));
        holds
            .hold(&globex, "r".into(), 1, grant(&l, "r", 1), TTL)
            .unwrap();
        assert_eq!((holds.held_by("acme"), holds.held_by("globex")), (2, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn leases_run_out() {
        let l = limiter();
        let holds = Holds::new(10, 2);
        let acme: Arc<str> = Arc::from("acme");
        let id = holds
            .hold(&acme, "slots".into(), 1, grant(&l, "slots", 1), TTL)
            .unwrap();
        tokio::time::advance(TTL).await;
        holds.expire();
        assert_eq!(l.get_capacity("slots").unwrap().in_flight, 0);
        assert_eq!(holds.held_by("acme"), 0);
        assert!(holds.release("acme", id, None).is_err());
    }
}
