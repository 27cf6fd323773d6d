//! Waits and instants as upstreams write them: Go durations, decimal
//! seconds, RFC 3339 timestamps, Unix epochs and HTTP-dates, each turned
//! into a [`Duration`] from a `now` the caller passes.
//!
//! Numbers are parsed exactly (integers of nanoseconds, never `f64`), so
//! "7.66s" is 7.66 s and not 7.659999999 s, and every step is checked: an
//! overflow is a malformed value (`None`), never a panic.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::rfc3339::rfc3339;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Values at or above this many seconds are read as Unix timestamps: as a
/// wait they would be over 31 years, as a timestamp they are after 2001.
const EPOCH_THRESHOLD_SECS: u128 = 1_000_000_000;

/// Parses a `Retry-After` value: delta-seconds (`"120"`, also decimal
/// `"1.5"`) or an HTTP-date, which becomes the wait from `now` (zero once
/// it has passed).
///
/// Returns `None` for anything else, including negative numbers.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(wait) = seconds(value) {
        return Some(wait);
    }
    httpdate::parse_http_date(value)
        .ok()
        .map(|at| until(at, now))
}

/// Parses a quota's reset, in whichever form an upstream writes it:
///
/// - a Go duration, as OpenAI sends: `"6m0s"`, `"20ms"`, `"1h2m3.5s"`,
///   `"100us"` or `"100µs"`;
/// - seconds, integer or decimal: `"30"`, `"1.5"`;
/// - a Unix timestamp in seconds (`"1714564830"`, values of 10⁹ and more);
/// - an RFC 3339 timestamp, as Anthropic sends: `"2024-05-01T12:00:30Z"`,
///   `"2024-05-01T14:00:30.5+02:00"`;
/// - an HTTP-date: `"Wed, 01 May 2024 12:00:30 GMT"`.
///
/// Timestamps become the wait from `now`, zero once they have passed.
/// Returns `None` for anything else.
pub fn parse_reset(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(nanos) = decimal(value, NANOS_PER_SEC) {
        let wait = to_duration(nanos)?;
        return if nanos >= EPOCH_THRESHOLD_SECS * NANOS_PER_SEC {
            UNIX_EPOCH.checked_add(wait).map(|at| until(at, now))
        } else {
            Some(wait)
        };
    }
    if let Some(wait) = go_duration(value) {
        return Some(wait);
    }
    if let Some(at) = rfc3339(value) {
        return Some(until(at, now));
    }
    httpdate::parse_http_date(value)
        .ok()
        .map(|at| until(at, now))
}

/// Non-negative decimal seconds: `"30"`, `"1.5"`, `".25"`.
pub(super) fn seconds(value: &str) -> Option<Duration> {
    to_duration(decimal(value.trim(), NANOS_PER_SEC)?)
}

/// Non-negative decimal milliseconds, as in `retry-after-ms`.
pub(super) fn millis(value: &str) -> Option<Duration> {
    to_duration(decimal(value.trim(), 1_000_000)?)
}

/// The wait from `now` until `at`: zero if `at` has passed, as a reset in
/// the past means the quota is already full again.
fn until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or(Duration::ZERO)
}

fn to_duration(nanos: u128) -> Option<Duration> {
    let secs = u64::try_from(nanos / NANOS_PER_SEC).ok()?;
    let subsec = u32::try_from(nanos % NANOS_PER_SEC).ok()?;
    Some(Duration::new(secs, subsec))
}

/// `digits[.digits]` times `unit` nanoseconds, exactly; at least one digit.
fn decimal(s: &str, unit: u128) -> Option<u128> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let all_digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    if int.len() + frac.len() == 0 || !all_digits(int) || !all_digits(frac) {
        return None;
    }
    let whole = int.bytes().try_fold(0u128, |n, b| {
        n.checked_mul(10)?.checked_add(u128::from(b - b'0'))
    })?;
    // Digits past the 18th are below a nanosecond for every unit used
    // here; keeping 18 bounds `value * unit` (< 10^18 · 3.6·10^12) in u128.
    let kept = &frac.as_bytes()[..frac.len().min(18)];
    let (value, scale) = kept.iter().fold((0u128, 1u128), |(v, s), b| {
        (v * 10 + u128::from(b - b'0'), s * 10)
    });
    whole.checked_mul(unit)?.checked_add(value * unit / scale)
}

/// A Go `time.Duration` string: `[+-]` then one or more `number unit`
/// pairs, units `ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`; or `"0"`.
/// A negative duration is a reset already passed, so it reads as zero.
fn go_duration(s: &str) -> Option<Duration> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let is_number = |c: char| c.is_ascii_digit() || c == '.';
    let mut total = 0u128;
    while !rest.is_empty() {
        let (number, tail) = rest.split_at(rest.find(|c| !is_number(c)).unwrap_or(rest.len()));
        let (unit, tail) = tail.split_at(tail.find(is_number).unwrap_or(tail.len()));
        let unit = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => NANOS_PER_SEC,
            "m" => 60 * NANOS_PER_SEC,
            "h" => 3_600 * NANOS_PER_SEC,
            _ => return None,
        };
        total = total.checked_add(decimal(number, unit)?)?;
        rest = tail;
    }
    let wait = to_duration(total)?;
    Some(if negative { Duration::ZERO } else { wait })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 2024-05-01T12:00:00Z.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_714_564_800)
    }

    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn go_durations_as_openai_sends_them() {
        let cases = [
            ("6m0s", ms(360_000)),
            ("1s", ms(1_000)),
            ("20ms", ms(20)),
            ("1h2m3.5s", ms(3_723_500)),
            ("0.5s", ms(500)),
            ("7.66s", ms(7_660)),
            ("1.5h", ms(5_400_000)),
            ("0s", ms(0)),
            ("0", ms(0)),
            ("100us", Some(Duration::from_micros(100))),
            ("100µs", Some(Duration::from_micros(100))),
            ("100μs", Some(Duration::from_micros(100))),
            ("250ns", Some(Duration::from_nanos(250))),
            ("1m30s500ms", ms(90_500)),
            ("+2s", ms(2_000)),
            ("-1s", ms(0)),
        ];
        for (value, want) in cases {
            assert_eq!(go_duration(value), want, "{value:?}");
            assert_eq!(parse_reset(value, now()), want, "{value:?} via parse_reset");
        }
    }

    #[test]
    fn malformed_go_durations_are_none() {
        for value in [
            "", "s", "1", "1x", "1S", "1..5s", "5s3", ".s", "-", "1 s", "s1", "1e3s",
        ] {
            assert_eq!(go_duration(value), None, "{value:?}");
        }
        assert_eq!(
            go_duration("99999999999999999999999999999999999999999h"),
            None
        );
        assert_eq!(
            go_duration(&format!("{}s", u64::MAX)),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            go_duration(&format!("{}s1s", u64::MAX)),
            None,
            "past Duration::MAX"
        );
    }

    #[test]
    fn seconds_integer_and_decimal() {
        assert_eq!(parse_reset("30", now()), ms(30_000));
        assert_eq!(parse_reset(" 1.5 ", now()), ms(1_500));
        assert_eq!(parse_reset(".25", now()), ms(250));
        assert_eq!(parse_reset("0.001", now()), ms(1));
        assert_eq!(
            seconds("1.0000000000000000000000001"),
            ms(1_000),
            "sub-ns digits dropped"
        );
        assert_eq!(millis("1234"), ms(1_234));
        assert_eq!(millis("0.5"), Some(Duration::from_micros(500)));
        for bad in ["", ".", "-1", "+1", "1.2.3", "1e3", "NaN", "١٢"] {
            assert_eq!(seconds(bad), None, "{bad:?}");
        }
        assert_eq!(
            seconds("340282366920938463463374607431768211456"),
            None,
            "u128 overflow"
        );
    }

    #[test]
    fn unix_epoch_resets_are_relative_to_now() {
        assert_eq!(parse_reset("1714564830", now()), ms(30_000));
        assert_eq!(parse_reset("1714564800.250", now()), ms(250));
        assert_eq!(parse_reset("1714564000", now()), ms(0), "in the past");
        assert_eq!(
            parse_reset("999999999", now()),
            Some(Duration::from_secs(999_999_999))
        );
        assert_eq!(
            parse_reset("18446744073709551616", now()),
            None,
            "past u64 seconds"
        );
    }

    #[test]
    fn rfc3339_timestamps_relative_to_now() {
        let cases = [
            ("2024-05-01T12:00:30Z", ms(30_000)),
            ("2024-05-01T12:00:30.5Z", ms(30_500)),
            (
                "2024-05-01T12:00:00.123456789123Z",
                Some(Duration::from_nanos(123_456_789)),
            ),
            ("2024-05-01t12:00:30z", ms(30_000)),
            ("2024-05-01 12:00:30Z", ms(30_000)),
            ("2024-05-01T14:00:30+02:00", ms(30_000)),
            ("2024-05-01T06:30:30-05:30", ms(30_000)),
            ("2024-05-02T00:00:00Z", ms(12 * 3_600_000)),
            ("2024-04-30T12:00:00Z", ms(0)),
            ("1969-12-31T23:59:59Z", ms(0)),
            ("2024-05-01T11:59:60Z", ms(0)),
        ];
        for (value, want) in cases {
            assert_eq!(parse_reset(value, now()), want, "{value:?}");
        }
    }

    #[test]
    fn retry_after_seconds_or_http_date() {
        assert_eq!(parse_retry_after("120", now()), ms(120_000));
        assert_eq!(parse_retry_after("1.5", now()), ms(1_500));
        assert_eq!(
            parse_retry_after("Wed, 01 May 2024 12:00:30 GMT", now()),
            ms(30_000)
        );
        assert_eq!(
            parse_retry_after("Wed, 01 May 2024 11:00:00 GMT", now()),
            ms(0)
        );
        assert_eq!(
            parse_reset("Wed, 01 May 2024 12:00:30 GMT", now()),
            ms(30_000)
        );
        for bad in [
            "",
            "-1",
            "soon",
            "1s",
            "2024-05-01T12:00:30Z",
            "Wed, 32 May 2024 12:00:30 GMT",
        ] {
            assert_eq!(parse_retry_after(bad, now()), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*") {
            let _ = parse_reset(&s, now());
            let _ = parse_retry_after(&s, now());
            let _ = parse_reset(&s, UNIX_EPOCH);
        }

        #[test]
        fn parsers_never_panic_on_near_misses(s in "[-+0-9.:TZtz µμnsmh,GMT]{0,40}") {
            let _ = parse_reset(&s, now());
            let _ = parse_retry_after(&s, now());
        }
    }
}
