//! Rate-limit headers as each upstream writes them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use super::Format;
use crate::quota::{BucketView, QuotaView};

/// The provider's headers for both buckets, on every response. Google
/// sends none: a Gemini client learns its limits from 429s alone.
pub(crate) fn rate_limit(format: Format, view: &QuotaView, headers: &mut HeaderMap) {
    if format == Format::Gemini {
        return;
    }
    for (bucket, what) in [(&view.requests, "requests"), (&view.tokens, "tokens")] {
        let Some(b) = bucket else { continue };
        match format {
            Format::OpenAi => {
                put(
                    headers,
                    &format!("x-ratelimit-limit-{what}"),
                    b.limit.to_string(),
                );
                put(
                    headers,
                    &format!("x-ratelimit-remaining-{what}"),
                    b.remaining.to_string(),
                );
                put(
                    headers,
                    &format!("x-ratelimit-reset-{what}"),
                    go_duration(b.reset),
                );
            }
            Format::Anthropic => {
                let now = SystemTime::now();
                let reset = rfc3339(now.checked_add(b.reset).unwrap_or(now));
                put(
                    headers,
                    &format!("anthropic-ratelimit-{what}-limit"),
                    b.limit.to_string(),
                );
                put(
                    headers,
                    &format!("anthropic-ratelimit-{what}-remaining"),
                    b.remaining.to_string(),
                );
                put(headers, &format!("anthropic-ratelimit-{what}-reset"), reset);
            }
            // Azure sends what remains, not the limit or its reset.
            Format::Azure => put(
                headers,
                &format!("x-ratelimit-remaining-{what}"),
                b.remaining.to_string(),
            ),
            Format::Gemini => {}
        }
    }
}

/// IETF RateLimit fields (draft 08 on) for a SaaS API's request bucket.
pub(crate) fn ietf(view: &QuotaView, headers: &mut HeaderMap) {
    let Some(BucketView {
        limit,
        remaining,
        reset,
    }) = view.requests
    else {
        return;
    };
    let reset = ceil_secs(reset);
    put(
        headers,
        "ratelimit-policy",
        format!("\"default\";q={limit}"),
    );
    put(
        headers,
        "ratelimit",
        format!("\"default\";r={remaining};t={reset}"),
    );
}

/// `Retry-After` in whole seconds (rounded up, so that a client that
/// obeys it is never early) and `retry-after-ms` exactly.
pub(crate) fn retry_after(after: Duration, headers: &mut HeaderMap) {
    put(headers, "retry-after", ceil_secs(after).to_string());
    put(headers, "retry-after-ms", ceil_millis(after).to_string());
}

pub(crate) fn put(headers: &mut HeaderMap, name: &str, value: String) {
    if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
        headers.insert(name, value);
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

fn ceil_millis(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000)
}

/// A wait as Go's `time.Duration` prints it, to the millisecond (rounded
/// up): `"0s"`, `"20ms"`, `"1s"`, `"7.66s"`, `"6m0s"`, `"1h2m3.5s"`.
pub(crate) fn go_duration(d: Duration) -> String {
    let ms = ceil_millis(d);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    let (secs, frac) = (ms / 1_000, ms % 1_000);
    let (h, m, s) = (secs / 3_600, secs % 3_600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&s.to_string());
    if frac > 0 {
        let digits = format!("{frac:03}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push('s');
    out
}

/// An instant as RFC 3339 in UTC, to the second (rounded up):
/// `"2024-05-01T12:00:30Z"`; past jiff's last instant (9999-12-30), that.
pub(crate) fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let last = jiff::Timestamp::MAX.as_second();
    let secs = i64::try_from(ceil_secs(since)).map_or(last, |s| s.min(last));
    // Whole seconds, so jiff writes no fraction.
    jiff::Timestamp::from_second(secs)
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_micros(1)), "1ms");
        assert_eq!(go_duration(ms(20)), "20ms");
        assert_eq!(go_duration(ms(1_000)), "1s");
        assert_eq!(go_duration(ms(7_660)), "7.66s");
        assert_eq!(go_duration(ms(360_000)), "6m0s");
        assert_eq!(go_duration(ms(3_723_500)), "1h2m3.5s");
    }

    #[test]
    fn rfc3339_dates() {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(at(1_714_564_830)), "2024-05-01T12:00:30Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(
            rfc3339(at(1) - Duration::from_millis(1)),
            "1970-01-01T00:00:01Z"
        );
    }

    #[test]
    fn retry_after_rounds_up() {
        let mut h = HeaderMap::new();
        retry_after(Duration::from_micros(1_200_001), &mut h);
        assert_eq!(h["retry-after"], "2");
        assert_eq!(h["retry-after-ms"], "1201");
        retry_after(Duration::MAX, &mut h);
        assert_eq!(h["retry-after"], u64::MAX.to_string().as_str());
    }
}
