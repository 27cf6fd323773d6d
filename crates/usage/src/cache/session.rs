//! The per-session cache: the last few answers of one agent session, for
//! agents that re-ask within a conversation.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};

use super::{CacheKey, Entry, Scope};

/// The longest session id accepted, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// A session id, within its scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionId {
    scope: Scope,
    id: String,
}

/// A session id that is empty, longer than [`MAX_SESSION_ID_BYTES`], or
/// has a byte outside visible ASCII.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session id must be 1 to {MAX_SESSION_ID_BYTES} visible ASCII characters")]
pub struct InvalidSessionId;

impl SessionId {
    /// The session `id` of a client in `scope`.
    ///
    /// # Errors
    ///
    /// [`InvalidSessionId`] when `id` is empty, too long or not visible
    /// ASCII.
    pub fn new(scope: Scope, id: &str) -> Result<Self, InvalidSessionId> {
        let valid = !id.is_empty()
            && id.len() <= MAX_SESSION_ID_BYTES
            && id.bytes().all(|b| b.is_ascii_graphic());
        if !valid {
            return Err(InvalidSessionId);
        }
        Ok(SessionId {
            scope,
            id: id.to_owned(),
        })
    }

    /// Its scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.scope, self.id)
    }
}

/// One session's answers, most recently used first.
#[derive(Debug, Default)]
pub(super) struct SessionLru {
    items: Mutex<VecDeque<(CacheKey, Arc<Entry>)>>,
    /// Sum of the entries' weights, fixed when the list is built (a hit
    /// only reorders it).
    weight: u32,
}

impl SessionLru {
    pub(super) fn new(items: VecDeque<(CacheKey, Arc<Entry>)>) -> Self {
        let weight = items
            .iter()
            .map(|(_, e)| e.weight())
            .fold(64u32, u32::saturating_add);
        SessionLru {
            items: Mutex::new(items),
            weight,
        }
    }

    pub(super) fn weight(&self) -> u32 {
        self.weight
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(CacheKey, Arc<Entry>)>> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry for `key`, moved to the front.
    pub(super) fn get(&self, key: &CacheKey) -> Option<Arc<Entry>> {
        let mut items = self.lock();
        let at = items.iter().position(|(k, _)| k == key)?;
        let item = items.remove(at)?;
        let entry = Arc::clone(&item.1);
        items.push_front(item);
        Some(entry)
    }

    /// Drops the entry for `key`, if any (it expired).
    pub(super) fn remove(&self, key: &CacheKey) {
        self.lock().retain(|(k, _)| k != key);
    }

    /// A copy of the list with `entry` in front, at most `capacity` long,
    /// without entries `keep` refuses.
    pub(super) fn with(
        &self,
        key: CacheKey,
        entry: Arc<Entry>,
        capacity: usize,
        keep: impl Fn(&Entry) -> bool,
    ) -> SessionLru {
        let mut items: VecDeque<_> = self
            .lock()
            .iter()
            .filter(|(k, e)| *k != key && keep(e))
            .map(|(k, e)| (*k, Arc::clone(e)))
            .collect();
        items.push_front((key, entry));
        items.truncate(capacity);
        SessionLru::new(items)
    }

    /// A copy without the entries `remove` picks, and how many it dropped.
    pub(super) fn without(&self, remove: impl Fn(&CacheKey, &Entry) -> bool) -> (SessionLru, u64) {
        let items = self.lock();
        let kept: VecDeque<_> = items
            .iter()
            .filter(|(k, e)| !remove(k, e))
            .map(|(k, e)| (*k, Arc::clone(e)))
            .collect();
        let dropped = (items.len() - kept.len()) as u64;
        (SessionLru::new(kept), dropped)
    }

    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
