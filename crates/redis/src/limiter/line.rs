//! A line's lease: the head of a line of waiters on one token bucket or
//! GCRA reserves, in one script call, a token for each waiter queued:
//! what the shared bucket holds and what comes due within the call's
//! horizon, at most a burst ahead (`ops.lua`, "A line's lease"). The
//! tokens leave the shared bucket at once and are handed to the line's
//! waiters at their due times, so the bucket's bound holds across
//! replicas. While the line lasts, the next reservation goes out before
//! the last one runs out: the bucket is not left to fill, and overflow,
//! while the replica's call is on its way.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::acquire::Waitq;
use super::{Inner, Refusal, lock};
use crate::batch::{Kind, Op, Spec};
use crate::grant::{Held, RedisGrant};

/// How long reserved tokens may wait past their due time for a waiter:
/// the next in line take theirs within microseconds; tokens left longer
/// belonged to waiters that went away, and go back.
const STASH_TTL: Duration = Duration::from_millis(50);

/// The round trip assumed before a line's first reservation answers.
const FIRST_RTT: Duration = Duration::from_millis(2);

/// How long a line sends no reservation after one failed.
const AFTER_FAILURE: Duration = Duration::from_millis(50);

/// Tokens reserved for a line's waiters and not yet handed out.
#[derive(Debug, Default)]
pub(crate) struct Stash {
    spec: Option<Arc<Spec>>,
    /// What each reservation got, in the shared bucket's order.
    segs: VecDeque<Seg>,
    /// A reservation is on its way (one at a time per line).
    refilling: bool,
    /// The last reservation was refused: none goes out before this.
    not_before: Option<Instant>,
    /// The reservations' round trip, a moving average.
    rtt: Option<Duration>,
}

/// One reservation's tokens: the last due at `last`, each one before it
/// `per` earlier (those due before the call arrived are due at once).
#[derive(Debug)]
struct Seg {
    tokens: u64,
    last: Instant,
    per: Duration,
}

fn span(per: Duration, n: u64) -> Duration {
    let ns = per.as_nanos().saturating_mul(u128::from(n));
    Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

impl Seg {
    /// When its first `k` tokens (1 ≤ `k` ≤ its tokens) are all due.
    fn when(&self, k: u64) -> Instant {
        let later = span(self.per, self.tokens.saturating_sub(k));
        self.last.checked_sub(later).unwrap_or(self.last)
    }
}

/// What a line's stash has for a waiter.
pub(crate) enum Stashed {
    Grant(RedisGrant),
    /// Its tokens are reserved and due then.
    Due(Instant),
    /// Not enough reserved; a reservation is on its way.
    Coming,
    /// Not enough reserved, nothing on its way: the head asks Redis.
    Empty,
}

impl Stash {
    fn tokens(&self) -> u64 {
        self.segs.iter().map(|s| s.tokens).sum()
    }

    /// When the first `cost` tokens reserved are all due, if that many are.
    fn due_at(&self, cost: u64) -> Option<Instant> {
        let mut need = cost;
        let mut at: Option<Instant> = None;
        for s in &self.segs {
            let k = need.min(s.tokens);
            if k > 0 {
                let t = s.when(k);
                at = Some(at.map_or(t, |a| a.max(t)));
            }
            need -= k;
            if need == 0 {
                return at;
            }
        }
        None
    }

    /// Hands out the first `cost` tokens.
    fn consume(&mut self, mut cost: u64) {
        while cost > 0 {
            let Some(s) = self.segs.front_mut() else {
                return;
            };
            let k = cost.min(s.tokens);
            s.tokens -= k;
            cost -= k;
            if s.tokens == 0 {
                self.segs.pop_front();
            }
        }
    }

    /// Everything reserved, to be given back.
    fn drain(&mut self) -> Option<(Arc<Spec>, u64)> {
        let tokens = self.tokens();
        self.segs.clear();
        match &self.spec {
            Some(s) if tokens > 0 => Some((s.clone(), tokens)),
            _ => None,
        }
    }

    /// What may no longer be handed out, to be given back: tokens of
    /// another spec than `spec` (its limit changed), or due more than
    /// [`STASH_TTL`] ago.
    fn take_stale(&mut self, spec: &Arc<Spec>, now: Instant) -> Option<(Arc<Spec>, u64)> {
        if !self.spec.as_ref().is_some_and(|s| Arc::ptr_eq(s, spec)) {
            let stale = self.drain();
            self.spec = Some(spec.clone());
            self.not_before = None;
            return stale;
        }
        let mut tokens = 0;
        while let Some(s) = self.segs.front()
            && s.last + STASH_TTL < now
        {
            tokens += s.tokens;
            self.segs.pop_front();
        }
        (tokens > 0).then(|| (spec.clone(), tokens))
    }

    /// How early the next reservation goes out: one and a half round
    /// trips before the last one runs out, so that it is decided before
    /// then whatever the round trip's jitter.
    fn lead(&self) -> Duration {
        (self.rtt.unwrap_or(FIRST_RTT) * 3 / 2).clamp(Duration::from_millis(1), STASH_TTL)
    }

    /// How far ahead a reservation reaches: until the next one is decided
    /// (a round trip on), with half a round trip to spare. Reaching
    /// further would only push other replicas' next tokens later.
    fn horizon(&self) -> Duration {
        self.lead() + self.rtt.unwrap_or(FIRST_RTT) / 2
    }

    /// Whether `queued` waiters of `cost` each need another reservation
    /// now; if so, marks one on its way and says how many tokens to ask.
    fn refill(&mut self, cost: u64, queued: u64, now: Instant) -> Option<u64> {
        let held = self.tokens();
        let need = cost.saturating_mul(queued);
        let soon = self.segs.back().is_none_or(|s| s.last < now + self.lead());
        if self.refilling || held >= need || !soon || self.not_before.is_some_and(|t| now < t) {
            return None;
        }
        self.refilling = true;
        Some(need - held)
    }
}

/// Clears a line's `refilling` mark however its reservation ends.
struct Refilling(Arc<Waitq>);

impl Drop for Refilling {
    fn drop(&mut self) {
        lock(&self.0.stash).refilling = false;
        self.0.notify.notify_one();
    }
}

impl Inner {
    /// The one token bucket or GCRA of `needs` a line's lease serves.
    fn lined(needs: &[(Arc<Spec>, u64)]) -> Option<(&Arc<Spec>, u64)> {
        match needs {
            [(spec, cost)] if spec.leasable() && *cost > 0 => Some((spec, *cost)),
            _ => None,
        }
    }

    /// What the line's stash has for `needs`; for a line of `queued`
    /// waiters, sends the next reservation when the stash runs low.
    pub(crate) fn from_stash(
        self: &Arc<Self>,
        needs: &[(Arc<Spec>, u64)],
        q: &Arc<Waitq>,
        queued: u64,
    ) -> Stashed {
        let Some((spec, cost)) = Self::lined(needs) else {
            return Stashed::Empty;
        };
        let now = Instant::now();
        let (stale, due, refill, coming) = {
            let mut st = lock(&q.stash);
            let stale = st.take_stale(spec, now);
            let due = st.due_at(cost);
            // A waiter served now leaves the line: the rest need tokens.
            let mut queued = queued;
            if due.is_some_and(|t| t <= now) {
                st.consume(cost);
                queued = queued.saturating_sub(1);
            }
            // Not to a Redis known to be away: the reservation would fail
            // at once and wake the head to send another, round and round
            // until every waiter's deadline, when the head should fall
            // to the local share as a lone caller does (`Stashed::Empty`
            // sends it to `attempt_for_line`, whose precheck says so).
            let refill = if queued > 1 && !self.conn.is_degraded() {
                st.refill(cost, queued, now)
            } else {
                None
            };
            (stale, due, refill, st.refilling)
        };
        self.give_back(stale);
        if let Some(want) = refill {
            let (inner, q, spec) = (self.clone(), q.clone(), spec.clone());
            tokio::spawn(async move {
                let _ = inner.reserve(q, spec, cost, want).await;
            });
        }
        match due {
            Some(t) if t <= now => Stashed::Grant(self.bucket_grant(spec, cost)),
            Some(t) => Stashed::Due(t),
            None if coming => Stashed::Coming,
            None => Stashed::Empty,
        }
    }

    /// The head of a line of `queued` waiters found the stash empty and
    /// nothing on its way: reserves for the line (the tokens go to the
    /// stash; `Ok(None)`), or, for a line of one or several resources,
    /// tries as any caller does.
    pub(crate) async fn attempt_for_line(
        self: &Arc<Self>,
        needs: &[(Arc<Spec>, u64)],
        q: &Arc<Waitq>,
        queued: u64,
    ) -> Result<Option<RedisGrant>, Refusal> {
        let Some((spec, cost)) = Self::lined(needs).filter(|_| queued > 1) else {
            return self.attempt_alone(needs).await.map(Some);
        };
        self.precheck(needs)?;
        let want = {
            let mut st = lock(&q.stash);
            if st.refilling {
                return Ok(None);
            }
            st.refilling = true;
            cost.saturating_mul(queued)
                .saturating_sub(st.tokens())
                .max(cost)
        };
        // Spawned, so that a waiter that goes away mid-call never loses
        // what the call reserved: it reaches the stash (or goes back).
        let (inner, q, spec) = (self.clone(), q.clone(), spec.clone());
        match tokio::spawn(async move { inner.reserve(q, spec, cost, want).await }).await {
            Ok(r) => r.map(|()| None),
            Err(_) => Err(Refusal::Down),
        }
    }

    /// One reservation of up to `want` tokens (at least `cost`) for the
    /// line `q`, which the caller has marked `refilling`.
    async fn reserve(
        self: Arc<Self>,
        q: Arc<Waitq>,
        spec: Arc<Spec>,
        cost: u64,
        want: u64,
    ) -> Result<(), Refusal> {
        let _mark = Refilling(q.clone());
        let ahead = lock(&q.stash).horizon();
        let sent = Instant::now();
        let r = self
            .request(Kind::Lease {
                spec: spec.clone(),
                // Never more than a burst ahead of a burst (the script
                // keeps the debt to one).
                want: want.min(spec.limit.max_cost().saturating_mul(2)),
                min: cost,
                weight: self.weight(&spec.name),
                line: true,
                ahead_us: u64::try_from(ahead.as_micros()).unwrap_or(u64::MAX),
            })
            .await;
        let Ok(r) = r else {
            // Redis is away, or answered an error: the line's head takes
            // the local share or tries alone (`attempt_for_line`); no
            // reservation goes out meanwhile, so that an error answered
            // at once does not turn into one call after another.
            lock(&q.stash).not_before = Some(Instant::now() + AFTER_FAILURE);
            return Err(Refusal::Down);
        };
        let back = Instant::now();
        let got = u64::try_from(r[0]).unwrap_or(0);
        let mut st = lock(&q.stash);
        let took = back - sent;
        st.rtt = Some(st.rtt.map_or(took, |a| (a * 3 + took) / 4));
        if got < cost {
            // Nothing taken (the script takes at least `cost` or nothing).
            drop(st);
            let refusal = self.refused(&[(spec, cost)], [0, r[1].max(1), 1, r[3]]);
            if let Refusal::Wait { wait, .. } = &refusal {
                lock(&q.stash).not_before = Some(back + *wait);
            }
            return Err(refusal);
        }
        // Nobody is left to spend them (or the line serves a changed
        // limit now): they go back at once.
        let line_of = st.spec.as_ref().is_some_and(|s| Arc::ptr_eq(s, &spec));
        if !line_of || q.waiting.load(Ordering::SeqCst) == 0 {
            let stale = if line_of { st.drain() } else { None };
            drop(st);
            self.give_back(stale);
            self.give_back(Some((spec, got)));
            return Ok(());
        }
        let due = Duration::from_micros(u64::try_from(r[1]).unwrap_or(0));
        let per = Duration::from_nanos(u64::try_from(r[2]).unwrap_or(0));
        st.not_before = None;
        st.segs.push_back(Seg {
            tokens: got,
            last: back + due,
            per,
        });
        Ok(())
    }

    /// The line on `resource` gives back what it reserved (its capacity
    /// changed, or its last waiter left).
    pub(crate) fn drop_line(self: &Arc<Self>, q: &Waitq) {
        let stale = lock(&q.stash).drain();
        self.give_back(stale);
    }

    fn give_back(self: &Arc<Self>, stale: Option<(Arc<Spec>, u64)>) {
        if let Some((spec, tokens)) = stale {
            self.send(Op {
                kind: Kind::Settle {
                    spec,
                    member: String::new(),
                    reserved: tokens,
                    actual: 0,
                },
                reply: None,
            });
        }
    }

    pub(crate) fn bucket_grant(self: &Arc<Self>, spec: &Arc<Spec>, cost: u64) -> RedisGrant {
        RedisGrant {
            inner: self.clone(),
            parts: vec![Held {
                spec: spec.clone(),
                reserved: cost,
                member: String::new(),
            }],
            local: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Arc<Spec> {
        Arc::new(Spec::new(
            "m".into(),
            sluice_limit::Limit::per_second(1_000),
            0,
        ))
    }

    fn stash(segs: &[(u64, u64)], base: Instant) -> Stash {
        let mut st = Stash {
            spec: Some(spec()),
            ..Stash::default()
        };
        for (tokens, last_ms) in segs {
            st.segs.push_back(Seg {
                tokens: *tokens,
                last: base + Duration::from_millis(*last_ms),
                per: Duration::from_millis(1),
            });
        }
        st
    }

    /// Five tokens, the last due at +4 ms, one a millisecond: the k-th is
    /// due at +(k − 1) ms, never earlier; the next reservation's follow.
    #[test]
    fn tokens_are_due_one_per_interval_up_to_the_last() {
        let t = Instant::now();
        let st = stash(&[(5, 4), (2, 6)], t);
        let ms = |k| st.due_at(k).map(|d| d.saturating_duration_since(t));
        assert_eq!(ms(1), Some(Duration::ZERO));
        assert_eq!(ms(3), Some(Duration::from_millis(2)));
        assert_eq!(ms(5), Some(Duration::from_millis(4)));
        assert_eq!(ms(6), Some(Duration::from_millis(5)));
        assert_eq!(ms(7), Some(Duration::from_millis(6)));
        assert_eq!(ms(8), None, "only seven reserved");
    }

    /// Handing out takes the earliest tokens; the later keep their times.
    #[test]
    fn handing_out_takes_the_earliest() {
        let t = Instant::now();
        let mut st = stash(&[(5, 4), (2, 6)], t);
        st.consume(6);
        assert_eq!(st.tokens(), 1);
        assert_eq!(st.due_at(1), Some(t + Duration::from_millis(6)));
    }

    /// Tokens due long ago belonged to waiters that left, and go back; so
    /// does everything reserved under a limit since changed.
    #[test]
    fn stale_tokens_go_back() {
        let t = Instant::now();
        let mut st = stash(&[(5, 4), (2, 100)], t);
        let s = st.spec.clone().unwrap();
        let late = t + Duration::from_millis(4) + STASH_TTL + Duration::from_millis(1);
        assert_eq!(st.take_stale(&s, late).map(|x| x.1), Some(5));
        assert_eq!(st.tokens(), 2);
        assert_eq!(st.take_stale(&spec(), late).map(|x| x.1), Some(2));
        assert_eq!(st.tokens(), 0);
    }

    /// The next reservation goes out when the reserved run out within the
    /// lead, for what the queued waiters lack, one at a time.
    #[test]
    fn a_refill_goes_out_before_the_reserved_run_out() {
        let t = Instant::now();
        let mut st = stash(&[(5, 100)], t);
        assert_eq!(st.refill(1, 10, t), None, "100 ms reserved: not yet");
        // Before the first answer the round trip is taken as 2 ms: the
        // lead is 3 ms.
        let mut st = stash(&[(5, 2)], t);
        assert_eq!(st.refill(1, 10, t), Some(5));
        assert_eq!(st.refill(1, 10, t), None, "one on its way");
        let mut st = stash(&[(5, 2)], t);
        assert_eq!(st.refill(1, 5, t), None, "every waiter has its token");
    }
}
