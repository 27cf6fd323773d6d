//! RFC 3339 timestamps, as Anthropic writes its resets, read by hand: a
//! fixed layout and day arithmetic are all it takes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T`/`Z`
/// in either case or a space for `T`), as an instant. Seconds may be 60
/// (a leap second), which lands on the next second.
pub(super) fn rfc3339(s: &str) -> Option<SystemTime> {
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
    if !(1..=12).contains(&month)
        || !(1..=days_in_month(year, month)).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }

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
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second - offset;
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
pub fn format_rfc3339(secs: i64, micros: u32) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// A proleptic Gregorian date from days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`): counted in 400-year eras that start on March 1st,
/// so the leap day is the last day of its year.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
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
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 5, 1), 19_844);
        assert_eq!(days_from_civil(0, 1, 1), -719_528);
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
