//! RFC 3339 timestamps, as Anthropic writes its resets: the fixed layout
//! is read here, the calendar is jiff's.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jiff::SignedDuration;
use jiff::civil::DateTime;

/// The Unix epoch as a civil date-time in UTC.
const EPOCH: DateTime = DateTime::constant(1970, 1, 1, 0, 0, 0, 0);

/// An RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T`/`Z`
/// in either case or a space for `T`), as an instant. Seconds may be 60
/// (a leap second), which lands on the next second.
pub fn rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |from: usize, to: usize| -> Option<i64> {
        let digits = b.get(from..to)?;
        digits.iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let at = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    // jiff has no leap seconds: :60 is read as :59 and one second more,
    // which lands on the next second.
    let leap = i64::from(second == 60);
    let field = |n: i64| i8::try_from(n).ok();
    let civil = DateTime::new(
        i16::try_from(year).ok()?,
        field(month)?,
        field(day)?,
        field(hour)?,
        field(minute)?,
        field(second - leap)?,
        0,
    )
    .ok()?;

    let mut i = 19;
    let mut nanos = 0u32;
    if at(i, b".") {
        let start = i + 1;
        i = start;
        while at(i, b"0123456789") {
            i += 1;
        }
        if i == start {
            return None;
        }
        // Nanosecond precision: the first nine digits, zero-padded.
        nanos = (start..start + 9).fold(0, |n, j| {
            let d = if j < i { b[j] - b'0' } else { 0 };
            n * 10 + u32::from(d)
        });
    }
    let offset = match b.get(i)? {
        b'Z' | b'z' if b.len() == i + 1 => 0,
        sign @ (b'+' | b'-') if b.len() == i + 6 && at(i + 3, b":") => {
            let (h, m) = (num(i + 1, i + 3)?, num(i + 4, i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3_600 + m * 60;
            if *sign == b'+' { offset } else { -offset }
        }
        _ => return None,
    };

    // Local time minus its offset is UTC.
    let secs = civil.duration_since(EPOCH).as_secs() + leap - offset;
    let since_epoch = Duration::from_secs(secs.unsigned_abs());
    let whole = if secs >= 0 {
        UNIX_EPOCH.checked_add(since_epoch)
    } else {
        UNIX_EPOCH.checked_sub(since_epoch)
    };
    whole?.checked_add(Duration::from_nanos(u64::from(nanos)))
}

/// `secs` seconds and `micros` microseconds since the Unix epoch as an
/// RFC 3339 date-time in UTC with microseconds
/// (`2026-11-23T10:34:56.000005Z`); the inverse of the parser above.
/// Instants outside the years -9999 to 9999 are written as the nearest of
/// those.
pub fn format_rfc3339(secs: i64, micros: u32) -> String {
    let at = EPOCH
        .checked_add(SignedDuration::from_secs(secs))
        .unwrap_or(if secs < 0 {
            DateTime::MIN
        } else {
            DateTime::MAX
        });
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(secs: i64, nanos: u32) -> Option<SystemTime> {
        let whole = if secs >= 0 {
            UNIX_EPOCH.checked_add(Duration::from_secs(secs.unsigned_abs()))
        } else {
            UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
        };
        whole?.checked_add(Duration::from_nanos(u64::from(nanos)))
    }

    #[test]
    fn the_forms_upstreams_send() {
        let cases = [
            ("2024-05-01T12:00:30Z", at(1_714_564_830, 0)),
            ("2024-05-01T12:00:30.5Z", at(1_714_564_830, 500_000_000)),
            (
                "2024-05-01T12:00:30.123456789123Z",
                at(1_714_564_830, 123_456_789),
            ),
            ("2024-05-01t12:00:30z", at(1_714_564_830, 0)),
            ("2024-05-01 12:00:30Z", at(1_714_564_830, 0)),
            ("2024-05-01T14:00:30+02:00", at(1_714_564_830, 0)),
            ("2024-05-01T06:30:30-05:30", at(1_714_564_830, 0)),
            ("2024-05-01T12:00:59.999Z", at(1_714_564_859, 999_000_000)),
            ("2024-05-01T12:00:60Z", at(1_714_564_860, 0)),
            ("1970-01-01T00:00:00Z", at(0, 0)),
            ("1969-12-31T23:59:59.5Z", at(-1, 500_000_000)),
            ("0000-01-01T00:00:00Z", at(-62_167_219_200, 0)),
            ("9999-12-31T23:59:59Z", at(253_402_300_799, 0)),
        ];
        for (value, want) in cases {
            assert_eq!(rfc3339(value), want, "{value:?}");
        }
    }

    #[test]
    fn malformed_timestamps_are_none() {
        let bad = [
            "2024-05-01T12:00:30",
            "2024-05-01T12:00:30ZZ",
            "2024-05-01T12:00:30.Z",
            "2024-05-01T12:00:30+0200",
            "2024-05-01T12:00:30+02:00:00",
            "2024-13-01T12:00:30Z",
            "2024-00-01T12:00:30Z",
            "2023-02-29T12:00:30Z",
            "2100-02-29T12:00:30Z",
            "2024-04-31T12:00:30Z",
            "2024-05-01T24:00:00Z",
            "2024-05-01T12:60:00Z",
            "2024-05-01T12:00:61Z",
            "2024-05-01T12:00:30+24:00",
            "2024-5-01T12:00:30Z",
            "+024-05-01T12:00:30Z",
            "2024-05-01T12:00:3éZ",
        ];
        for value in bad {
            assert_eq!(rfc3339(value), None, "{value:?}");
        }
        assert!(rfc3339("2024-02-29T00:00:00Z").is_some(), "leap year");
        assert!(rfc3339("2000-02-29T00:00:00Z").is_some(), "leap century");
    }

    #[test]
    fn formatted_timestamps_read_back() {
        assert_eq!(format_rfc3339(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format_rfc3339(1_795_430_096, 5),
            "2026-11-23T10:34:56.000005Z"
        );
        assert_eq!(
            format_rfc3339(951_782_400, 0),
            "2000-02-29T00:00:00.000000Z"
        );
        for secs in [-86_401, 0, 68_169_600, 951_868_799, 1_795_430_096] {
            assert_eq!(
                rfc3339(&format_rfc3339(secs, 250_000)),
                at(secs, 250_000_000),
                "{secs}"
            );
        }
    }

    #[test]
    fn civil_day_numbers() {
        let days = [
            ("1970-01-01", 0),
            ("1969-12-31", -1),
            ("2000-03-01", 11_017),
            ("2024-05-01", 19_844),
            ("0000-01-01", -719_528),
        ];
        for (date, n) in days {
            assert_eq!(rfc3339(&format!("{date}T00:00:00Z")), at(n * 86_400, 0));
        }
    }

    proptest! {
        /// Our RFC 3339 reading agrees with httpdate's for every second
        /// of 1970–9999.
        #[test]
        fn rfc3339_agrees_with_http_date(secs in 0u64..253_402_300_800) {
            let at = UNIX_EPOCH + Duration::from_secs(secs);
            // "Wed, 01 May 2024 12:00:30 GMT"
            let http = httpdate::fmt_http_date(at);
            let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
                .iter()
                .position(|m| *m == &http[8..11])
                .unwrap()
                + 1;
            let rfc = format!("{}-{month:02}-{}T{}Z", &http[12..16], &http[5..7], &http[17..25]);
            prop_assert_eq!(rfc3339(&rfc), Some(at), "{}", rfc);
        }
    }
}
