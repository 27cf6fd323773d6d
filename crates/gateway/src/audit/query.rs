//! The audit trail as the API reads it: a query string's filter
//! ([`filter`]) and an entry as JSON ([`entry_json`]), shared by
//! `GET /v1/audit` and the dashboard's recent acts.
//!
//! `from` and `to` are RFC 3339 times or milliseconds since the Unix
//! epoch (`from` included, `to` not); `actor` is exact (`admin`,
//! `key:{id}`, `tenant:{name}`, `upstream`, `bus:{replica}`); `kind` is
//! exact or a prefix up to a dot (`key` selects `key.revoke`, …); `limit`
//! is 1 to 1,000 (default 100); `before` (an entry's id) pages on.

use std::time::UNIX_EPOCH;

use serde_json::Value;
use sluice_audit::{Entry, Filter};

use crate::error::ApiError;

/// The filter a query string asks for.
///
/// # Errors
/// 400 naming the parameter that is unknown, repeated or unreadable.
pub(crate) fn filter(query: &str) -> Result<Filter, ApiError> {
    let mut f = Filter::default();
    let mut seen: Vec<String> = Vec::new();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if seen.iter().any(|s| *s == name) {
            return Err(ApiError::bad_field(&name, "given twice"));
        }
        seen.push(name.to_string());
        let value = value.trim();
        let text = || -> Result<String, ApiError> {
            if value.is_empty() {
                return Err(ApiError::bad_field(&name, "must not be empty"));
            }
            Ok(value.to_owned())
        };
        match name.as_ref() {
            "from" => f.from_ms = Some(instant(&name, value)?),
            "to" => f.to_ms = Some(instant(&name, value)?),
            "actor" => f.actor = Some(text()?),
            "kind" => f.kind = Some(text()?),
            "limit" => {
                f.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=Filter::MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_field(
                            "limit",
                            format!("must be a whole number from 1 to {}", Filter::MAX_LIMIT),
                        )
                    })?;
            }
            "before" => {
                f.before_id = Some(value.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(
                    || ApiError::bad_field("before", "must be an entry id (from next_before)"),
                )?);
            }
            other => {
                return Err(ApiError::bad_field(
                    other,
                    "unknown query parameter (from, to, actor, kind, limit, before)",
                ));
            }
        }
    }
    if let (Some(from), Some(to)) = (f.from_ms, f.to_ms)
        && from >= to
    {
        return Err(ApiError::bad_field("to", "must be after `from`"));
    }
    Ok(f)
}

/// `value` as milliseconds since the Unix epoch: a whole number of them,
/// or an RFC 3339 time.
fn instant(name: &str, value: &str) -> Result<i64, ApiError> {
    if let Ok(ms) = value.parse::<i64>() {
        return Ok(ms);
    }
    sluice_limit::headers::parse_rfc3339(value)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .ok_or_else(|| {
            ApiError::bad_field(
                name,
                "must be an RFC 3339 time (2026-01-31T12:00:00Z) or milliseconds since the Unix epoch",
            )
        })
}

/// An entry as the API shows it: as stored, with its time in RFC 3339.
pub(crate) fn entry_json(e: &Entry) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    let (secs, ms) = (e.at_ms.div_euclid(1_000), e.at_ms.rem_euclid(1_000));
    let micros = u32::try_from(ms * 1_000).unwrap_or(0);
    v["at"] = sluice_limit::headers::format_rfc3339(secs, micros).into();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(q: &str) -> Option<String> {
        match filter(q) {
            Err(e) => e.body()["error"]["param"].as_str().map(str::to_owned),
            Ok(_) => None,
        }
    }

    #[test]
    fn every_parameter_is_read() {
        let f = filter(
            "from=2026-01-01T00:00:00Z&to=1767225600001&actor=admin&kind=key&limit=5&before=9",
        )
        .unwrap();
        assert_eq!(f.from_ms, Some(1_767_225_600_000));
        assert_eq!(f.to_ms, Some(1_767_225_600_001));
        assert_eq!(f.actor.as_deref(), Some("admin"));
        assert_eq!(f.kind.as_deref(), Some("key"));
        assert_eq!((f.limit, f.before_id), (5, Some(9)));
        assert_eq!(filter("").unwrap(), Filter::default());
    }

    #[test]
    fn a_bad_parameter_is_named() {
        for (q, p) in [
            ("from=yesterday", "from"),
            ("to=2026-13-01T00:00:00Z", "to"),
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=ten", "limit"),
            ("before=-1", "before"),
            ("actor=", "actor"),
            ("kind=%20", "kind"),
            ("actor=a&actor=b", "actor"),
            ("from=2&to=1", "to"),
            ("tenant=acme", "tenant"),
        ] {
            assert_eq!(param(q).as_deref(), Some(p), "{q}");
        }
    }
}
