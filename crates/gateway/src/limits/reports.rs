//! What a tenant's report of an upstream's answer (`POST
//! /v1/limits/report`) may do to a resource others share.
//!
//! A tenant's word alone never pauses, shrinks or drains a shared model,
//! token quota or API for the other tenants: an uncorroborated refusal
//! (a 429, or rate-limit headers that would lower the bucket) pauses the
//! reporter's *own* acquires of that resource for the wait it reported
//! (at most [`MAX_OWN_PAUSE`]), and nobody else's. The shared resource
//! takes the report only when another tenant reported a refusal of the
//! same resource within [`CORROBORATION`]: two tenants must agree, and
//! even then the limiter caps any pause at `adaptive.max_pause_seconds`.
//! Rate-limit headers a tenant reports on an answer that was not a
//! refusal are not applied to a shared resource at all (the gateway's own
//! upstream answers keep it in step).
//! A tenant may report at most [`PER_MINUTE`] times a minute. Where the
//! gateway is open (no tenants) every caller is trusted and reports are
//! applied as they come. The route audits every report (`limit.report`),
//! with what it did.
//!
//! Every map is bounded ([`MAX_ENTRIES`]); entries older than the window
//! are dropped when an insert finds the map full.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// How long a refusal reported by one tenant waits for another tenant's
/// to agree.
pub(crate) const CORROBORATION: Duration = Duration::from_secs(60);
/// Reports one tenant may make in a minute.
pub(crate) const PER_MINUTE: u32 = 60;
/// The longest a report pauses its reporter's own acquires.
pub(crate) const MAX_OWN_PAUSE: Duration = Duration::from_secs(60);
/// The most entries each map keeps.
const MAX_ENTRIES: usize = 10_000;

/// What to do with a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Apply it to the shared resource (corroborated, open, or harmless).
    Shared,
    /// Only the reporter's own acquires of the resource wait, until then.
    Own(Instant),
    /// Rate-limit headers on an answer that was not a refusal: a tenant's
    /// word is not enough to lower a shared bucket, and they pause nobody.
    Ignored,
}

impl Verdict {
    /// As the audit trail and the answer name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Shared => "shared",
            Verdict::Own(_) => "own",
            Verdict::Ignored => "ignored",
        }
    }
}

/// The tenant reported more than [`PER_MINUTE`] times this minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooMany {
    /// When it may report again.
    pub(crate) retry_after: Duration,
}

/// See the module doc.
#[derive(Debug, Default)]
pub(crate) struct Reports {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Tenant → (start of its minute, reports in it).
    rate: HashMap<Arc<str>, (Instant, u32)>,
    /// Resource → the tenants that reported a refusal of it, and when.
    refusals: HashMap<String, Vec<(Arc<str>, Instant)>>,
    /// (Tenant, resource) → until when its own acquires of it wait.
    own: HashMap<(Arc<str>, String), Instant>,
}

impl Reports {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a report by `tenant`.
    ///
    /// # Errors
    /// [`TooMany`] past [`PER_MINUTE`] in the tenant's current minute.
    pub(crate) fn count(&self, tenant: &Arc<str>) -> Result<(), TooMany> {
        let now = Instant::now();
        let mut st = self.lock();
        if st.rate.len() >= MAX_ENTRIES && !st.rate.contains_key(tenant) {
            st.rate
                .retain(|_, (start, _)| now.duration_since(*start) < Duration::from_secs(60));
        }
        let (start, n) = st.rate.entry(tenant.clone()).or_insert((now, 0));
        if now.duration_since(*start) >= Duration::from_secs(60) {
            *start = now;
            *n = 0;
        }
        if *n >= PER_MINUTE {
            return Err(TooMany {
                retry_after: (*start + Duration::from_secs(60)).saturating_duration_since(now),
            });
        }
        *n += 1;
        Ok(())
    }

    /// What a refusal of the shared `resource` reported by `tenant`, who
    /// was told to wait `wait`, does.
    pub(crate) fn refusal(&self, tenant: &Arc<str>, resource: &str, wait: Duration) -> Verdict {
        let now = Instant::now();
        let mut st = self.lock();
        if st.refusals.len() >= MAX_ENTRIES && !st.refusals.contains_key(resource) {
            st.refusals.retain(|_, seen| {
                seen.retain(|(_, at)| now.duration_since(*at) < CORROBORATION);
                !seen.is_empty()
            });
        }
        let corroborated = {
            let seen = st.refusals.entry(resource.to_owned()).or_default();
            seen.retain(|(_, at)| now.duration_since(*at) < CORROBORATION);
            let other = seen.iter().any(|(t, _)| t != tenant);
            seen.retain(|(t, _)| t != tenant);
            // Bounded by the tenants that report within the window; a
            // handful is enough to know that another one agrees.
            if seen.len() >= 16 {
                seen.remove(0);
            }
            seen.push((tenant.clone(), now));
            other
        };
        if corroborated {
            return Verdict::Shared;
        }
        let until = now + wait.min(MAX_OWN_PAUSE);
        if st.own.len() >= MAX_ENTRIES {
            st.own.retain(|_, u| *u > now);
        }
        if st.own.len() < MAX_ENTRIES {
            st.own.insert((tenant.clone(), resource.to_owned()), until);
        }
        Verdict::Own(until)
    }

    /// How long `tenant`'s own acquires of `resource` still wait, if they
    /// do.
    pub(crate) fn paused(&self, tenant: &str, resource: &str) -> Option<Duration> {
        let st = self.lock();
        if st.own.is_empty() {
            return None;
        }
        let key = (Arc::<str>::from(tenant), resource.to_owned());
        st.own
            .get(&key)
            .map(|until| until.saturating_duration_since(Instant::now()))
            .filter(|d| !d.is_zero())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_tenant_alone_pauses_only_itself() {
        let r = Reports::default();
        let (acme, globex): (Arc<str>, Arc<str>) = ("acme".into(), "globex".into());
        let wait = Duration::from_secs(60);
        assert!(matches!(r.refusal(&acme, "m", wait), Verdict::Own(_)));
        // Saying it again does not corroborate itself.
        assert!(matches!(r.refusal(&acme, "m", wait), Verdict::Own(_)));
        assert_eq!(r.paused("acme", "m"), Some(wait));
        assert_eq!(r.paused("globex", "m"), None);
        // Another tenant agreeing within the window makes it shared.
        assert_eq!(r.refusal(&globex, "m", wait), Verdict::Shared);
        // Outside the window it does not.
        tokio::time::advance(CORROBORATION + Duration::from_secs(1)).await;
        assert_eq!(r.paused("acme", "m"), None, "the own pause ended");
        assert!(matches!(r.refusal(&acme, "m", wait), Verdict::Own(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn own_pauses_are_capped() {
        let r = Reports::default();
        let acme: Arc<str> = "acme".into();
        r.refusal(&acme, "m", Duration::from_secs(3_600));
        assert_eq!(r.paused("acme", "m"), Some(MAX_OWN_PAUSE));
    }

    #[tokio::test(start_paused = true)]
    async fn reports_are_counted_per_tenant_per_minute() {
        let r = Reports::default();
        let (acme, globex): (Arc<str>, Arc<str>) = ("acme".into(), "globex".into());
        for _ in 0..PER_MINUTE {
            r.count(&acme).unwrap();
        }
        let too_many = r.count(&acme).unwrap_err();
        assert_eq!(too_many.retry_after, Duration::from_secs(60));
        r.count(&globex).expect("another tenant's count is its own");
        tokio::time::advance(Duration::from_secs(60)).await;
        r.count(&acme).expect("a new minute");
    }
}
