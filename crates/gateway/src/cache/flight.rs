//! Identical misses in flight together: the first leads (goes upstream),
//! the others wait for its whole answer and are served from it, streams
//! included (replayed once the leader's stream has ended).
//!
//! Why not the admission queue's deduplication: it shares a result when
//! the leader's permit completes, and a streamed answer is whole only when
//! its stream ends, long after the request path below has returned; the
//! flight has to live with the stream's capture, which is here. Requests
//! with the same client id still deduplicate in the queue.
//!
//! Bounded by the requests in flight: an entry lives as long as its
//! leader, and a leader that fails or goes away lets the others go
//! upstream themselves (one of them leads the next flight).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sluice_usage::cache::{Answer, CacheKey};
use tokio::sync::watch;
use tokio::time::Instant;

/// What a flight ended with: `None` while it runs, then the whole answer,
/// or `Some(None)` when the leader had none to share.
type Outcome = Option<Option<Arc<Answer>>>;

/// The flights in progress, by cache key.
#[derive(Debug, Default)]
pub(crate) struct Flights {
    map: Mutex<HashMap<CacheKey, watch::Receiver<Outcome>>>,
}

/// Who a request is in its flight.
pub(crate) enum Role {
    /// It goes upstream; the guard publishes (or gives up) for the rest.
    Lead(Leader),
    /// Another request leads: wait for it.
    Join(watch::Receiver<Outcome>),
}

/// The leader's side of a flight: publishes the answer, or on drop tells
/// the others to go on their own.
#[derive(Debug)]
pub(crate) struct Leader {
    flights: Arc<Flights>,
    key: CacheKey,
    tx: watch::Sender<Outcome>,
}

impl Flights {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<CacheKey, watch::Receiver<Outcome>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leads the flight of `key`, or joins the one in progress.
    pub(crate) fn enter(self: &Arc<Self>, key: CacheKey) -> Role {
        let mut map = self.lock();
        if let Some(rx) = map.get(&key)
            && rx.borrow().is_none()
        {
            return Role::Join(rx.clone());
        }
        let (tx, rx) = watch::channel(None);
        map.insert(key, rx);
        Role::Lead(Leader {
            flights: Arc::clone(self),
            key,
            tx,
        })
    }

    /// Flights in progress now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

impl Leader {
    /// Shares `answer` with every request that joined.
    pub(crate) fn publish(self, answer: Arc<Answer>) {
        self.tx.send_replace(Some(Some(answer)));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        // Not published: the joiners go on their own.
        self.tx.send_if_modified(|o| {
            if o.is_some() {
                return false;
            }
            *o = Some(None);
            true
        });
        let mut map = self.flights.lock();
        // Ours unless a later flight of the same key replaced it.
        if map
            .get(&self.key)
            .is_some_and(|rx| rx.same_channel(&self.tx.subscribe()))
        {
            map.remove(&self.key);
        }
    }
}

/// Waits until `deadline` for the flight `rx` to end: the leader's answer,
/// or `None` when it had none (or the deadline passed first).
pub(crate) async fn wait(
    mut rx: watch::Receiver<Outcome>,
    deadline: Instant,
) -> Option<Arc<Answer>> {
    let ended = tokio::time::timeout_at(deadline, rx.wait_for(Option::is_some)).await;
    match ended {
        Ok(Ok(outcome)) => outcome.clone().flatten(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use sluice_usage::Endpoint;
    use sluice_usage::cache::Scope;

    use super::*;

    fn key(q: &str) -> CacheKey {
        let body =
            json!({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": q}]});
        CacheKey::for_request(&Scope::Tenant("t".into()), "p", Endpoint::Chat, &body)
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_leads_and_the_others_get_its_answer() {
        let flights = Arc::new(Flights::default());
        let Role::Lead(leader) = flights.enter(key("q")) else {
            panic!("the first leads");
        };
        let Role::Join(rx) = flights.enter(key("q")) else {
            panic!("the second joins");
        };
        assert!(matches!(flights.enter(key("other")), Role::Lead(_)));
        let deadline = Instant::now() + Duration::from_secs(5);
        let waiting = tokio::spawn(wait(rx, deadline));
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "pending until the leader answers");
        leader.publish(Arc::new(Answer::json("{}")));
        let got = waiting.await.expect("joined").expect("an answer");
        assert_eq!(&got.body[..], b"{}");
        assert_eq!(flights.len(), 0, "the flight ended with its leader");
        assert!(matches!(flights.enter(key("q")), Role::Lead(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_goes_away_lets_the_others_go_on() {
        let flights = Arc::new(Flights::default());
        let Role::Lead(leader) = flights.enter(key("q")) else {
            panic!("leads");
        };
        let Role::Join(rx) = flights.enter(key("q")) else {
            panic!("joins");
        };
        drop(leader);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(wait(rx, deadline).await.is_none());
        assert_eq!(flights.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_joiner_waits_no_longer_than_its_deadline() {
        let flights = Arc::new(Flights::default());
        let Role::Lead(_leader) = flights.enter(key("q")) else {
            panic!("leads");
        };
        let Role::Join(rx) = flights.enter(key("q")) else {
            panic!("joins");
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        assert!(wait(rx, deadline).await.is_none());
        assert_eq!(Instant::now(), deadline);
    }
}
