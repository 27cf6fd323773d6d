//! What a locked resource does that counts grants or what was taken: the
//! counts live beside the lock-free path (the resource's in-flight count,
//! [`Fast::taken`](super::Fast)), where grants on that path keep them
//! without the lock, so these are methods of the guard, which reaches
//! both the state and the resource.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Locked, Served, nanos};
use crate::adaptive::Cut;
use crate::meter::{Nanos, Stamp, mul_div_ceil};
use crate::{Algorithm, Capacity};

impl Locked<'_> {
    /// Grants held (and served, not yet taken) on this resource.
    pub(crate) fn in_flight(&self) -> u64 {
        u64::from(self.res.in_flight.load(Ordering::Acquire))
    }

    /// Everything taken so far, net of settles (wrapping; see
    /// [`Fast::taken`](super::Fast)).
    pub(crate) fn taken(&self) -> u64 {
        self.res.fast.taken.load(Ordering::Relaxed)
    }

    /// Counts a grant made under the lock in flight: what
    /// [`Locked::taken`] was right after its take.
    pub(crate) fn count_grant(&mut self) -> u64 {
        self.res.in_flight.fetch_add(1, Ordering::AcqRel);
        self.taken()
    }

    /// A grant let go: counts it out and gives back what it holds of an
    /// in-flight limit, or serves what is due in passing.
    pub(crate) fn release(&mut self, now: Nanos, reserved: u64) {
        self.res.in_flight.fetch_sub(1, Ordering::AcqRel);
        if self.limit.kind() == Algorithm::InFlight {
            self.meter.release(reserved);
            self.wake_head();
        } else {
            // A call ending is as good a moment as the head's timer to
            // let go what is due.
            self.serve_in_passing(now);
        }
    }

    /// Takes `cost` from the meter and counts it in [`Locked::taken`].
    pub(crate) fn take(&mut self, now: Nanos, cost: u64) -> Stamp {
        self.add_taken(cost);
        self.meter.take(now, cost)
    }

    /// [`Locked::take`] for a waiter on this resource alone that joined at
    /// `joined`: the jitter margin is held once per busy period, and a
    /// bucket that filled up while the waiter queued (the serving thread
    /// came late) did not start a new one. After a pause (a Retry-After)
    /// it did: the upstream saw no calls either.
    pub(crate) fn take_waiter(&mut self, at: Nanos, cost: u64, joined: Nanos) -> Stamp {
        self.add_taken(cost);
        let paused = self.adaptive.as_ref().map_or(0, |a| a.paused_until);
        self.meter.take_waiter(at, cost, joined, paused)
    }

    fn add_taken(&self, amount: u64) {
        self.res.fast.taken.fetch_add(amount, Ordering::Relaxed);
    }

    /// Changes what a grant took by `delta` (a settle): a refund gives it
    /// back to the meter, a debit takes more, even into debt.
    pub(crate) fn adjust(&mut self, now: Nanos, stamp: Stamp, delta: i128) {
        if delta < 0 {
            let amount = u64::try_from(-delta).unwrap_or(u64::MAX);
            self.res.fast.taken.fetch_sub(amount, Ordering::Relaxed);
            self.meter.refund(now, stamp, amount);
        } else {
            let amount = u64::try_from(delta).unwrap_or(u64::MAX);
            self.add_taken(amount);
            self.meter.debit(now, amount);
        }
    }

    /// Grants, in FIFO order, every waiter at the head of the queue that
    /// waits on this resource alone and whose tokens are due at `now`, in
    /// one pass: at high rates a token is due every few microseconds, and
    /// a wake-up per grant would cap the rate at the timer's. Each grant is
    /// left for its task (see [`State::take_served`](super::State::take_served))
    /// and the task woken; the first waiter not granted is woken to look
    /// at the meter itself.
    pub(crate) fn serve(&mut self, now: Nanos) {
        self.serve_due(now, true);
    }

    /// [`Locked::serve`] in passing, from whatever else touches the
    /// resource while waiters queue (a newcomer, a grant let go): under
    /// load the head's timer fires late (a serving thread's runtime looks
    /// at its timers only between tasks, every so many of them), and the
    /// calls that keep a busy resource busy come often, so what is due
    /// goes then instead. The head is woken only if someone went, to arm
    /// its own timer as the new head; otherwise its timer stands.
    pub(crate) fn serve_in_passing(&mut self, now: Nanos) {
        if !self.waiters.is_empty() {
            self.serve_due(now, false);
        }
    }

    fn serve_due(&mut self, now: Nanos, wake_unready: bool) {
        let mut served = false;
        while let Some((&ticket, w)) = self.waiters.first_key_value() {
            let (cost, joined, alone, deadline) = (w.cost, w.joined, w.alone, w.deadline);
            let ready = alone
                && deadline.is_none_or(|d| now < d)
                && !self.closed
                && self.check(now, cost).is_ok();
            if !ready {
                if wake_unready || served {
                    self.wake_head();
                }
                return;
            }
            served = true;
            let at = self.grant_time(now, cost, joined);
            let Some(mut w) = self.waiters.remove(&ticket) else {
                return;
            };
            self.queued_cost -= cost;
            let stamp = self.take_waiter(at, cost, joined);
            let taken = self.count_grant();
            self.served.push(Served {
                ticket,
                cost,
                stamp,
                taken,
            });
            if let Some(waker) = w.waker.take() {
                waker.wake();
            }
        }
    }

    /// A waiter that was served but went away before taking its grant:
    /// what it was granted goes back, as if it had never been taken.
    pub(crate) fn unserve(&mut self, now: Nanos, ticket: u64) {
        if let Some(s) = self.take_served(ticket) {
            self.adjust(now, s.stamp, -i128::from(s.cost));
            self.res.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.wake_head();
        }
    }

    /// Aligns with an upstream's own count: no more than `remaining` is
    /// available from now.
    ///
    /// With `since`, the time and [`Locked::taken`] of the grant whose
    /// answer carried the count, the count is read as an upstream's usually
    /// is: rounded down, and as of when that call arrived, not now. What
    /// the upstream holds now is then at most `remaining + 1`, plus what
    /// refilled since, minus what was taken here since; clamping to the
    /// bare count would throw away the refill of every call's round trip.
    pub(crate) fn sync(
        &mut self,
        now: Nanos,
        remaining: u64,
        reset: Option<Duration>,
        shared: &super::Shared,
        since: Option<(Nanos, u64)>,
    ) {
        let cfg = shared.adaptive;
        let bound = match since {
            None => remaining,
            Some((at, taken)) => {
                let refilled = mul_div_ceil(
                    self.limit.capacity(),
                    now.saturating_sub(at),
                    self.limit.window_nanos().max(1),
                );
                // Signed: settles since may have given back more than was taken.
                let taken_since = self.taken().wrapping_sub(taken) as i64;
                let bound =
                    i128::from(remaining) + 1 + i128::from(refilled) - i128::from(taken_since);
                u64::try_from(bound.max(0)).unwrap_or(u64::MAX)
            }
        };
        self.meter.clamp_available(now, bound);
        if remaining == 0
            && let Some(reset) = reset
        {
            let a = self.adaptive_mut(shared);
            let until = now.saturating_add(nanos(reset.min(cfg.max_pause)));
            a.paused_until = a.paused_until.max(until);
        }
    }

    pub(crate) fn capacity(&mut self, name: &str, now: Nanos, shared: &super::Shared) -> Capacity {
        let in_flight = self.in_flight();
        let paused_for = self
            .adaptive
            .as_ref()
            .map(|a| a.paused_until.saturating_sub(now))
            .filter(|p| *p > 0)
            .map(Duration::from_nanos);
        let configured = *self.configured();
        let reason = self.reason(now);
        let available = self.meter.available(now);
        let a = self.adaptive.as_deref();
        Capacity {
            jitter_margin: Duration::from_nanos(a.map_or(shared.base_margin(), |a| a.margin)),
            reason,
            announced_per_second: a
                .filter(|a| a.estimate.samples >= crate::adaptive::estimate::SAMPLES)
                .map(|a| a.estimate.lo),
            announced_in_force: a.is_some_and(|a| a.cut == Cut::Announced),
            configured_window: configured.window(),
            resource: name.to_owned(),
            algorithm: self.limit.kind(),
            available,
            total: self.limit.capacity(),
            burst: self.limit.max_cost(),
            window: self.limit.window(),
            in_flight,
            waiting: self.waiters.len(),
            configured: configured.capacity(),
            paused_for,
        }
    }

    /// Nothing here that a fresh resource from the same rule would not have.
    pub(crate) fn is_idle(&mut self, now: Nanos) -> bool {
        self.in_flight() == 0
            && !self.pinned
            && self.waiters.is_empty()
            && self.adaptive.is_none()
            && self.meter.is_idle(now)
    }
}
