//! What goes into the API cache and comes out of it: how long an
//! upstream answer may be kept, the tee that stores a miss's body as it
//! goes through, and a hit as a response.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::Response;
use futures_util::StreamExt;
use sluice_usage::cache::{Answer, Hit, NewEntry};

use super::Lookup;
use crate::cache::{CACHE_HEADER, SharedCache};
use crate::response::REPRESENTATION_HEADERS;

/// The stored answer as a response, with `x-sluice-cache: hit` and `age`.
pub(super) fn answer(hit: &Hit) -> Response {
    let stored = hit.entry.answer();
    let mut res = Response::new(Body::from(stored.body.clone()));
    let h = res.headers_mut();
    for (name, value) in &stored.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.insert(name, value);
        }
    }
    h.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
    h.insert(header::AGE, HeaderValue::from(hit.age.as_secs()));
    res
}

/// How long an upstream answer may be kept: `ours`, cut to its
/// `max-age`; `None` when it must not be stored at all.
pub(super) fn ttl(headers: &HeaderMap, ours: Duration) -> Option<Duration> {
    if headers.contains_key(header::SET_COOKIE) {
        return None;
    }
    let vary_all = headers
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim() == "*");
    if vary_all {
        return None;
    }
    let mut ttl = ours;
    for directive in headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let (name, value) = match directive.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (directive.trim(), None),
        };
        if name.eq_ignore_ascii_case("no-store") || name.eq_ignore_ascii_case("no-cache") {
            return None;
        }
        if name.eq_ignore_ascii_case("max-age") {
            // An unreadable max-age is treated as 0: not stored.
            let seconds = value.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            ttl = ttl.min(Duration::from_secs(seconds));
        }
    }
    (!ttl.is_zero()).then_some(ttl)
}

/// `res` with its body captured on the way to the client and stored
/// once it has ended properly and whole (at most the cache's largest
/// entry; a body that fails, is cut or is larger is passed on, never
/// stored).
pub(super) fn tee(cache: SharedCache, l: Lookup, ttl: Duration, res: Response) -> Response {
    let (parts, body) = res.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| REPRESENTATION_HEADERS.contains(&name.as_str()))
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let max = usize::try_from(cache.config().max_entry_bytes).unwrap_or(usize::MAX);
    // Stored as soon as the declared length has come, before the last
    // chunk goes out: a client that has read the whole body finds the
    // entry there.
    let length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let tap = Tap {
        cache,
        lookup: l,
        ttl,
        headers,
        body: Some(Vec::new()),
        max,
        length,
    };
    let stream =
        futures_util::stream::unfold(Some((body.into_data_stream(), tap)), |state| async move {
            let (mut inner, mut tap) = state?;
            match inner.next().await {
                Some(Ok(chunk)) => {
                    tap.push(&chunk);
                    if tap.length.is_some() && tap.body.as_ref().map(Vec::len) == tap.length {
                        tap.finish().await;
                    }
                    Some((Ok(chunk), Some((inner, tap))))
                }
                Some(Err(e)) => Some((Err(std::io::Error::other(e)), None)),
                None => {
                    tap.finish().await;
                    None
                }
            }
        });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// A miss's body on its way through.
struct Tap {
    cache: SharedCache,
    lookup: Lookup,
    ttl: Duration,
    headers: Vec<(String, String)>,
    /// `None` once it grew past `max` or was stored.
    body: Option<Vec<u8>>,
    max: usize,
    /// The upstream's `content-length`, when it gave one.
    length: Option<usize>,
}

impl Tap {
    fn push(&mut self, chunk: &Bytes) {
        if let Some(b) = &mut self.body {
            if b.len() + chunk.len() > self.max {
                self.body = None;
            } else {
                b.extend_from_slice(chunk);
            }
        }
    }

    /// Stores the body (once).
    async fn finish(&mut self) {
        let Some(body) = self.body.take() else { return };
        if self.length.is_some_and(|n| n != body.len()) {
            return;
        }
        let new = NewEntry {
            scope: self.lookup.scope.clone(),
            model: self.lookup.label.clone(),
            answer: Answer {
                status: 200,
                headers: std::mem::take(&mut self.headers),
                body: Bytes::from(body),
            },
            usage: None,
            ttl: Some(self.ttl),
        };
        if let Ok(entry) = self.cache.entry(new) {
            self.cache.put(self.lookup.key, entry).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn upstream_cache_control_cuts_or_forbids_storing() {
        let ours = Duration::from_secs(600);
        let ttl = |pairs: &[(&str, &str)]| ttl(&headers(pairs), ours);
        assert_eq!(ttl(&[]), Some(ours));
        assert_eq!(
            ttl(&[("cache-control", "private, max-age=60, s-maxage=60")]),
            Some(Duration::from_secs(60))
        );
        assert_eq!(ttl(&[("cache-control", "max-age=86400")]), Some(ours));
        assert_eq!(ttl(&[("cache-control", "max-age=0")]), None);
        assert_eq!(ttl(&[("cache-control", "max-age=soon")]), None);
        assert_eq!(ttl(&[("cache-control", "No-Store")]), None);
        assert_eq!(
            ttl(&[("cache-control", "public"), ("cache-control", "no-cache")]),
            None
        );
        assert_eq!(ttl(&[("vary", "Accept, *")]), None);
        assert_eq!(ttl(&[("vary", "Accept, Authorization")]), Some(ours));
        assert_eq!(ttl(&[("set-cookie", "a=b")]), None);
    }
}
