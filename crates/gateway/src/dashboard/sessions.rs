//! Browser sessions of the dashboard: `POST /ui/login` trades a token
//! for a random session id in an `HttpOnly; SameSite=Strict` cookie, so
//! the token never sits in a URL (which proxies and histories log) nor
//! in page script (which an injected script could read).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use tokio::time::Instant;

/// The cookie's name.
pub(crate) const COOKIE_NAME: &str = "sluice_ui";
/// How long a session lasts.
pub(crate) const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at once; past it the one closest to its end goes.
const MAX_SESSIONS: usize = 1_000;

/// Open sessions: id → when it ends.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Instant>>,
}

impl Sessions {
    /// Opens a session; its id, for the cookie. `None` without the OS's
    /// random source: a guessable session id would be worse than none.
    pub(crate) fn open(&self) -> Option<String> {
        let mut raw = [0u8; 16];
        getrandom::fill(&mut raw).ok()?;
        let id: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|_, end| *end > now);
        if open.len() >= MAX_SESSIONS
            && let Some(first) = open
                .iter()
                .min_by_key(|(_, end)| **end)
                .map(|(k, _)| k.clone())
        {
            open.remove(&first);
        }
        open.insert(id.clone(), now + SESSION_TTL);
        Some(id)
    }

    /// Whether `headers` carry the cookie of an open session.
    pub(crate) fn check(&self, headers: &HeaderMap) -> bool {
        let Some(id) = cookie(headers) else {
            return false;
        };
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(id).is_some_and(|end| *end > Instant::now())
    }

    /// Ends the session of `headers`, if any.
    pub(crate) fn close(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            self.open
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(id);
        }
    }
}

/// The session id in the request's `Cookie` headers.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_cookie(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_str(v).unwrap());
        h
    }

    #[tokio::test(start_paused = true)]
    async fn a_session_opens_is_checked_and_ends() {
        let s = Sessions::default();
        let id = s.open().unwrap();
        assert_eq!(id.len(), 32);
        assert!(s.check(&with_cookie(&format!("a=b; {COOKIE_NAME}={id}; c=d"))));
        assert!(!s.check(&with_cookie(&format!("{COOKIE_NAME}=x{id}"))));
        assert!(!s.check(&with_cookie("a=b")));
        assert!(!s.check(&HeaderMap::new()));
        // It ends with its time...
        tokio::time::advance(SESSION_TTL + Duration::from_secs(1)).await;
        assert!(!s.check(&with_cookie(&format!("{COOKIE_NAME}={id}"))));
        // ...or at logout.
        let id = s.open().unwrap();
        let h = with_cookie(&format!("{COOKIE_NAME}={id}"));
        assert!(s.check(&h));
        s.close(&h);
        assert!(!s.check(&h));
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_are_bounded() {
        let s = Sessions::default();
        let first = s.open().unwrap();
        for _ in 0..MAX_SESSIONS {
            tokio::time::advance(Duration::from_millis(1)).await;
            s.open();
        }
        assert_eq!(s.open.lock().unwrap().len(), MAX_SESSIONS);
        assert!(!s.check(&with_cookie(&format!("{COOKIE_NAME}={first}"))));
    }
}
