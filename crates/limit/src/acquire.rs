//! [`Acquire`]: waiting for capacity, first come first served, without
//! polling.
//!
//! Each resource keeps its waiters in a map ordered by ticket. Only the head
//! looks at the meter: it sleeps on one timer until its tokens are due (so
//! a resource has one timer however many wait), or, when the wait is not a
//! matter of time (in-flight slots, a reduced capacity), until a release or
//! a capacity change wakes it. When the head is granted or leaves, it wakes
//! the next. Every other waiter sleeps without a timer, except for its own
//! deadline.
//!
//! A head that is granted serves the queue behind it in the same pass
//! (`Locked::serve`): every waiter on that resource alone whose tokens are
//! due is granted in FIFO order and woken to take its grant, so that one
//! wake-up lets go everything that came due meanwhile, however fine the
//! rate and however coarse the timer. A grant to a queued waiter is dated
//! when its tokens came due (see `State::grant_time`), not when its task
//! ran. A newcomer and a grant let go run the same pass in passing
//! (`Locked::serve_in_passing`), so what is due goes when the resource is
//! next touched if that comes before the head's timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Sleep;

use crate::Error;
use crate::grant::{Grant, Held};
use crate::limiter::Inner;
use crate::meter::Nanos;
use crate::registry::refuse_never;
use crate::resource::{Locked, Resource, Waiter};

/// One resource and the cost wanted from it.
#[derive(Debug)]
pub(crate) struct Need {
    pub(crate) resource: Arc<Resource>,
    pub(crate) cost: u64,
}

/// The future of [`Limiter::acquire`](crate::Limiter::acquire): resolves to
/// a [`Grant`] or an [`Error`]. Dropping it leaves the queue and holds
/// nothing.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire {
    inner: Arc<Inner>,
    needs: Result<Vec<Need>, Option<Error>>,
    deadline: Option<tokio::time::Instant>,
    ticket: Option<u64>,
    timer: Option<Pin<Box<Sleep>>>,
    deadline_timer: Option<Pin<Box<Sleep>>>,
    done: bool,
}

impl std::fmt::Debug for Acquire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acquire")
            .field("needs", &self.needs)
            .field("deadline", &self.deadline)
            .field("ticket", &self.ticket)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// What one look at the queues decided.
enum Step {
    Done(Result<Vec<Held>, Error>),
    /// At the head of every queue; the wait, if it is a matter of time.
    Head(Option<Nanos>),
    /// Behind someone.
    Queued,
}

impl Acquire {
    pub(crate) fn new(
        inner: Arc<Inner>,
        needs: Result<Vec<Need>, Error>,
        deadline: Option<tokio::time::Instant>,
    ) -> Self {
        Acquire {
            inner,
            needs: needs.map_err(Some),
            deadline,
            ticket: None,
            timer: None,
            deadline_timer: None,
            done: false,
        }
    }

    fn deadline_nanos(&self) -> Option<Nanos> {
        self.deadline.map(|d| {
            let d = d
                .into_std()
                .saturating_duration_since(self.inner.shared.epoch);
            u64::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
        })
    }

    fn step(&mut self, waker: &Waker) -> Step {
        let Ok(needs) = &self.needs else {
            unreachable!("checked by poll")
        };
        let now = self.inner.shared.now();
        let deadline = self.deadline_nanos();
        if let [one] = needs.as_slice() {
            let mut guards = [one.resource.lock()];
            step(
                &self.inner,
                needs,
                &mut guards,
                &mut self.ticket,
                deadline,
                waker,
                now,
            )
        } else {
            let mut guards: Vec<_> = needs.iter().map(|n| n.resource.lock()).collect();
            step(
                &self.inner,
                needs,
                &mut guards,
                &mut self.ticket,
                deadline,
                waker,
                now,
            )
        }
    }
}

impl Future for Acquire {
    type Output = Result<Grant, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(Err(Error::Closed));
        }
        if let Err(e) = &mut this.needs {
            this.done = true;
            return Poll::Ready(Err(e.take().unwrap_or(Error::Closed)));
        }
        loop {
            let step = this.step(cx.waker());
            this.inner.shared.dispatch();
            match step {
                Step::Done(out) => {
                    this.done = true;
                    this.ticket = None;
                    return Poll::Ready(out.map(|parts| Grant {
                        parts: parts.into(),
                    }));
                }
                Step::Head(Some(wait)) => {
                    let at = this.inner.shared.epoch
                        + Duration::from_nanos(this.inner.shared.now().saturating_add(wait));
                    let at = tokio::time::Instant::from_std(at);
                    match &mut this.timer {
                        Some(t) => t.as_mut().reset(at),
                        None => this.timer = Some(Box::pin(tokio::time::sleep_until(at))),
                    }
                }
                Step::Head(None) | Step::Queued => this.timer = None,
            }
            if let (Some(d), None) = (this.deadline, &this.deadline_timer) {
                this.deadline_timer = Some(Box::pin(tokio::time::sleep_until(d)));
            }
            let due = this
                .timer
                .as_mut()
                .is_some_and(|t| t.as_mut().poll(cx).is_ready());
            let late = this
                .deadline_timer
                .as_mut()
                .is_some_and(|t| t.as_mut().poll(cx).is_ready());
            if !due && !late {
                return Poll::Pending;
            }
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let (Some(ticket), Ok(needs)) = (self.ticket, &self.needs) {
            let now = self.inner.shared.now();
            let mut guards: Vec<_> = needs.iter().map(|n| n.resource.lock()).collect();
            for g in guards.iter_mut() {
                g.leave(ticket);
                // Served in passing but gone before taking it: the grant
                // goes back.
                g.unserve(now, ticket);
            }
        }
    }
}

/// Decides with every resource locked (in name order).
fn step(
    inner: &Inner,
    needs: &[Need],
    guards: &mut [Locked<'_>],
    ticket: &mut Option<u64>,
    deadline: Option<Nanos>,
    waker: &Waker,
    now: Nanos,
) -> Step {
    let leave = |guards: &mut [Locked<'_>], ticket: &mut Option<u64>| {
        if let Some(t) = ticket.take() {
            for g in guards.iter_mut() {
                g.leave(t);
            }
        }
    };
    // Granted by a pass over the queue (`Locked::serve`) since last polled.
    if let (Some(t), [g], [n]) = (*ticket, &mut *guards, needs)
        && let Some(served) = g.take_served(t)
    {
        *ticket = None;
        return Step::Done(Ok(vec![Held {
            resource: n.resource.clone(),
            reserved: served.cost,
            stamp: served.stamp,
            taken: served.taken,
        }]));
    }
    for (g, n) in guards.iter_mut().zip(needs) {
        g.tick(now, &inner.shared, &n.resource.name);
        if let Err(e) = refuse_never(g, &n.resource.name, n.cost) {
            leave(guards, ticket);
            return Step::Done(Err(e));
        }
    }
    let t = match *ticket {
        None => {
            for g in guards.iter_mut() {
                g.serve_in_passing(now);
            }
            if guards.iter().all(|g| g.waiters.is_empty()) && check_all(guards, needs, now).is_ok()
            {
                return Step::Done(Ok(take_all(guards, needs, now)));
            }
            // Fail fast when the wait behind everyone queued is known to
            // end after the deadline.
            let (wait, name) = estimate_all(guards, needs, now, None);
            if let (Some(d), Some(w)) = (deadline, wait)
                && now.saturating_add(w) > d
            {
                return Step::Done(Err(Error::DeadlinePassed {
                    resource: name,
                    wait: Some(Duration::from_nanos(w)),
                }));
            }
            let t = inner.next_ticket();
            for (g, n) in guards.iter_mut().zip(needs) {
                g.waiters.insert(
                    t,
                    Waiter {
                        cost: n.cost,
                        waker: Some(waker.clone()),
                        joined: now,
                        deadline,
                        alone: needs.len() == 1,
                    },
                );
                g.queued_cost += n.cost;
            }
            *ticket = Some(t);
            t
        }
        Some(t) => {
            for g in guards.iter_mut() {
                if let Some(w) = g.waiters.get_mut(&t) {
                    match &w.waker {
                        Some(old) if old.will_wake(waker) => {}
                        _ => w.waker = Some(waker.clone()),
                    }
                }
            }
            t
        }
    };
    let head = guards
        .iter()
        .all(|g| g.waiters.first_key_value().map(|(k, _)| *k) == Some(t));
    let wait = if head {
        match check_all(guards, needs, now) {
            Ok(()) => {
                if let ([g], [n]) = (&mut *guards, needs) {
                    // Dated when due, then everyone due behind it served
                    // in the same pass.
                    let joined = g.waiters.get(&t).map_or(now, |w| w.joined);
                    let at = g.grant_time(now, n.cost, joined);
                    let stamp = g.take_waiter(at, n.cost, joined);
                    let taken = g.count_grant();
                    let held = Held {
                        resource: n.resource.clone(),
                        reserved: n.cost,
                        stamp,
                        taken,
                    };
                    if let Some(w) = g.waiters.remove(&t) {
                        g.queued_cost -= w.cost;
                    }
                    *ticket = None;
                    g.serve(now);
                    return Step::Done(Ok(vec![held]));
                }
                let held = take_all(guards, needs, now);
                // Leaving wakes the next head, which may fit as well.
                leave(guards, ticket);
                return Step::Done(Ok(held));
            }
            Err((wait, _)) => wait,
        }
    } else {
        None
    };
    if deadline.is_some_and(|d| now >= d) {
        let (wait, name) = estimate_all(guards, needs, now, Some(t));
        leave(guards, ticket);
        return Step::Done(Err(Error::DeadlinePassed {
            resource: name,
            wait: wait.map(Duration::from_nanos),
        }));
    }
    if head { Step::Head(wait) } else { Step::Queued }
}

/// Ok when every need fits now; else the longest wait (`None` if any is not
/// a matter of time) and the index of the resource that sets it.
fn check_all(
    guards: &mut [Locked<'_>],
    needs: &[Need],
    now: Nanos,
) -> Result<(), (Option<Nanos>, usize)> {
    let mut worst: Option<(Option<Nanos>, usize)> = None;
    for (i, (g, n)) in guards.iter_mut().zip(needs).enumerate() {
        if let Err(w) = g.check(now, n.cost) {
            let longer = match (worst, w) {
                (None, _) => true,
                (Some((Some(_), _)), None) => true,
                (Some((Some(a), _)), Some(b)) => b > a,
                (Some((None, _)), _) => false,
            };
            if longer {
                worst = Some((w, i));
            }
        }
    }
    worst.map_or(Ok(()), Err)
}

/// The wait for everything queued up to (and including) `ticket` to go,
/// or for a newcomer behind everyone when `ticket` is `None`.
fn estimate_all(
    guards: &mut [Locked<'_>],
    needs: &[Need],
    now: Nanos,
    ticket: Option<u64>,
) -> (Option<Nanos>, String) {
    let mut worst: (Option<Nanos>, usize) = (Some(0), 0);
    for (i, (g, n)) in guards.iter_mut().zip(needs).enumerate() {
        let total = match ticket {
            None => g.queued_cost.saturating_add(n.cost),
            Some(t) => g.waiters.range(..=t).map(|(_, w)| w.cost).sum(),
        };
        let w = g.estimate(now, total);
        let longer = match (worst.0, w) {
            (Some(_), None) => true,
            (Some(a), Some(b)) => b > a,
            (None, _) => false,
        };
        if longer {
            worst = (w, i);
        }
    }
    (worst.0, needs[worst.1].resource.name.to_string())
}

fn take_all(guards: &mut [Locked<'_>], needs: &[Need], now: Nanos) -> Vec<Held> {
    guards
        .iter_mut()
        .zip(needs)
        .map(|(g, n)| take_one(g, n, now))
        .collect()
}

/// Takes `n` from one resource, dated `at`.
fn take_one(g: &mut Locked<'_>, n: &Need, at: Nanos) -> Held {
    let stamp = g.take(at, n.cost);
    let taken = g.count_grant();
    Held {
        resource: n.resource.clone(),
        reserved: n.cost,
        stamp,
        taken,
    }
}

/// All or nothing, now: for `try_acquire_many`.
pub(crate) fn try_all(inner: &Inner, needs: &[Need]) -> Result<Grant, Error> {
    let now = inner.shared.now();
    let mut guards: Vec<_> = needs.iter().map(|n| n.resource.lock()).collect();
    for (g, n) in guards.iter_mut().zip(needs) {
        g.tick(now, &inner.shared, &n.resource.name);
        refuse_never(g, &n.resource.name, n.cost)?;
    }
    let queued = guards.iter().any(|g| !g.waiters.is_empty());
    let refused = if queued {
        Some(estimate_all(&mut guards, needs, now, None))
    } else {
        check_all(&mut guards, needs, now)
            .err()
            .map(|(w, i)| (w, needs[i].resource.name.to_string()))
    };
    if let Some((wait, resource)) = refused {
        return Err(Error::RateLimited {
            resource,
            retry_after: wait.map(Duration::from_nanos),
        });
    }
    Ok(Grant {
        parts: take_all(&mut guards, needs, now).into(),
    })
}
