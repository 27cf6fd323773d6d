//! [`Permit`]: what any [`RateLimiter`](crate::RateLimiter) grants,
//! released on drop.

use std::fmt;

use crate::{Error, Grant};

/// A grant held by a limiter other than the in-process one (Redis): what
/// a [`Permit`] needs of it. Dropping it must release what it holds.
pub trait HeldGrant: Send + Sync + fmt::Debug {
    /// Settles every part at `actual` (as [`Grant::settle`]).
    fn settle(&mut self, actual: u64);

    /// Settles the part for `resource` at `actual` (as
    /// [`Grant::settle_part`]).
    ///
    /// # Errors
    /// [`Error::UnknownResource`] if the grant holds no such resource.
    fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error>;
}

/// What a [`RateLimiter`](crate::RateLimiter) granted: permission to make
/// a call, released when dropped.
///
/// The in-process [`Grant`] is held as it is, without an allocation;
/// other limiters' grants are boxed ([`Permit::new`]).
#[derive(Debug)]
#[must_use = "dropping a permit releases it at once"]
pub struct Permit(Held);

#[derive(Debug)]
enum Held {
    Local(Grant),
    Other(Box<dyn HeldGrant>),
}

impl Permit {
    /// Wraps another limiter's grant; dropping the permit drops (releases)
    /// it.
    pub fn new(grant: impl HeldGrant + 'static) -> Self {
        Permit(Held::Other(Box::new(grant)))
    }

    /// The in-process grant, if this is one (for [`Limiter`](crate::Limiter)'s
    /// own [`observe`](crate::RateLimiter::observe), which reads it).
    pub(crate) fn local(&self) -> Option<&Grant> {
        match &self.0 {
            Held::Local(g) => Some(g),
            Held::Other(_) => None,
        }
    }

    /// Settles every part at `actual`: see [`Grant::settle`].
    pub fn settle(&mut self, actual: u64) {
        match &mut self.0 {
            Held::Local(g) => g.settle(actual),
            Held::Other(g) => g.settle(actual),
        }
    }

    /// Settles the part for `resource` at `actual`: see
    /// [`Grant::settle_part`].
    ///
    /// # Errors
    /// [`Error::UnknownResource`] if the permit holds no such resource.
    pub fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
        match &mut self.0 {
            Held::Local(g) => g.settle_part(resource, actual),
            Held::Other(g) => g.settle_part(resource, actual),
        }
    }

    /// Releases now; the same as dropping the permit.
    pub fn release(self) {}
}

impl From<Grant> for Permit {
    fn from(grant: Grant) -> Self {
        Permit(Held::Local(grant))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Records what it was asked, and that it was dropped.
    #[derive(Debug)]
    struct Recorded(Arc<Mutex<Vec<String>>>);

    impl HeldGrant for Recorded {
        fn settle(&mut self, actual: u64) {
            self.0.lock().unwrap().push(format!("settle {actual}"));
        }

        fn settle_part(&mut self, resource: &str, actual: u64) -> Result<(), Error> {
            if resource != "a" {
                return Err(Error::UnknownResource(resource.to_owned()));
            }
            self.0.lock().unwrap().push(format!("{resource} {actual}"));
            Ok(())
        }
    }

    impl Drop for Recorded {
        fn drop(&mut self) {
            self.0.lock().unwrap().push("released".into());
        }
    }

    #[test]
    fn another_limiters_grant_settles_and_releases_through_the_permit() {
        let log = Arc::default();
        let mut p = Permit::new(Recorded(Arc::clone(&log)));
        assert!(p.local().is_none());
        p.settle(3);
        p.settle_part("a", 2).unwrap();
        assert!(matches!(
            p.settle_part("b", 1),
            Err(Error::UnknownResource(r)) if r == "b"
        ));
        p.release();
        assert_eq!(*log.lock().unwrap(), ["settle 3", "a 2", "released"]);
    }
}
