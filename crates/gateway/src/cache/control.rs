//! What a client asks of the cache in its headers (`x-sluice-cache`,
//! `x-sluice-cache-ttl`), read the same way for model requests and
//! proxied API calls: a bad value is a 400 naming the header.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName};

use super::{CACHE_HEADER, TTL_HEADER};
use crate::error::ApiError;

/// What the client asked of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Control {
    /// Look up, and store a miss's answer.
    Use,
    /// Neither look up nor store.
    Off,
    /// Do not look up, but store the new answer.
    Refresh,
    /// Answer from the cache or not at all (504).
    OnlyIfCached,
}

/// A header's trimmed value, `None` when absent or empty.
///
/// # Errors
/// 400 naming the header when it is not visible ASCII.
pub(crate) fn header<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a str>, ApiError> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()).filter(|s| !s.is_empty()))
            .map_err(|_| ApiError::bad_header(name.as_str(), "not visible ASCII")),
    }
}

/// `x-sluice-cache`, [`Control::Use`] when absent.
///
/// # Errors
/// 400 naming the header for any other value than the three it takes.
pub(crate) fn control(headers: &HeaderMap) -> Result<Control, ApiError> {
    Ok(match header(headers, &CACHE_HEADER)? {
        None => Control::Use,
        Some(v) if v.eq_ignore_ascii_case("off") => Control::Off,
        Some(v) if v.eq_ignore_ascii_case("refresh") => Control::Refresh,
        Some(v) if v.eq_ignore_ascii_case("only-if-cached") => Control::OnlyIfCached,
        Some(v) => {
            return Err(ApiError::bad_header(
                CACHE_HEADER.as_str(),
                format!("must be off, refresh or only-if-cached, not {v:?}"),
            ));
        }
    })
}

/// `x-sluice-cache-ttl` in whole seconds, 1 to `max`.
///
/// # Errors
/// 400 naming the header for anything else.
pub(crate) fn requested_ttl(headers: &HeaderMap, max: u64) -> Result<Option<Duration>, ApiError> {
    let Some(v) = header(headers, &TTL_HEADER)? else {
        return Ok(None);
    };
    let seconds: u64 = v
        .parse()
        .map_err(|_| ApiError::bad_header(TTL_HEADER.as_str(), "not a whole number of seconds"))?;
    if seconds == 0 {
        return Err(ApiError::bad_header(
            TTL_HEADER.as_str(),
            "must be at least 1",
        ));
    }
    if seconds > max {
        return Err(ApiError::bad_header(
            TTL_HEADER.as_str(),
            format!("must be at most {max} (cache.max_ttl_seconds)"),
        ));
    }
    Ok(Some(Duration::from_secs(seconds)))
}

/// The 504 of `only-if-cached` with nothing cached.
pub(crate) fn not_cached() -> ApiError {
    ApiError::Timeout(format!(
        "{CACHE_HEADER}: only-if-cached, and no cached answer matches this request"
    ))
}
