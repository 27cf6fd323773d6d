//! When a budget's count starts over: calendar periods in a time zone,
//! or a rolling window counted in slices.

use std::sync::{Mutex, PoisonError};

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// How many slices a rolling window is counted in: spend leaves the
/// window at most one slice (1/60 of it) late, never early.
pub const ROLLING_SLICES: i64 = 60;

/// A calendar period, from midnight in the budget's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    /// A day.
    Day,
    /// A week, from Monday.
    Week,
    /// A month, from the 1st.
    Month,
}

/// What a budget's spend is counted over.
#[derive(Debug, Clone, PartialEq)]
pub enum Window {
    /// The calendar period that contains now, in `tz`.
    Calendar {
        /// Day, week or month.
        period: Period,
        /// Where midnight is.
        tz: TimeZone,
        /// The period last found, kept so that a reservation in it does
        /// not work out the time zone's midnights again.
        last: LastPeriod,
    },
    /// The last `ms` milliseconds.
    Rolling {
        /// The window's length.
        ms: i64,
    },
}

/// Where now falls in a window: the slice that takes new spend, the
/// oldest slice still counted, and when the newest spend stops counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slices {
    /// The start (ms since the epoch) of the slice that takes new spend:
    /// the period's start, or the rolling slice's.
    pub current: i64,
    /// Slices that start before this no longer count.
    pub oldest: i64,
    /// A rolling slice's length (the period's, for a calendar).
    pub width: i64,
    /// When spend in `current` stops counting: the period's end, or the
    /// end of the window that `current` starts.
    pub expires: i64,
}

impl Slices {
    /// When spend in the slice starting at `slice` stops counting.
    pub fn leaves_at(&self, slice: i64) -> i64 {
        slice + (self.expires - self.current)
    }
}

/// A calendar window's last period, `[start, end)` in ms; part of no
/// comparison (two windows of the same period and zone are equal
/// whatever they last computed).
#[derive(Debug, Default)]
pub struct LastPeriod(Mutex<Option<(i64, i64)>>);

impl Clone for LastPeriod {
    fn clone(&self) -> Self {
        LastPeriod(Mutex::new(*self.lock()))
    }
}

impl PartialEq for LastPeriod {
    fn eq(&self, _: &LastPeriod) -> bool {
        true
    }
}

impl LastPeriod {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(i64, i64)>> {
        // Two numbers written at once: a poisoned lock still holds a pair.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Window {
    /// The calendar `period` in `tz`.
    pub fn calendar(period: Period, tz: TimeZone) -> Window {
        Window::Calendar {
            period,
            tz,
            last: LastPeriod::default(),
        }
    }

    /// The slices at `now_ms`.
    pub fn slices(&self, now_ms: i64) -> Slices {
        match self {
            Window::Rolling { ms } => {
                let width = (ms / ROLLING_SLICES).max(1);
                let count = (ms + width - 1) / width;
                let current = now_ms.div_euclid(width) * width;
                Slices {
                    current,
                    oldest: current - (count - 1) * width,
                    width,
                    expires: current + count * width,
                }
            }
            Window::Calendar { period, tz, last } => {
                let known = *last.lock();
                let (start, end) = match known {
                    Some((start, end)) if (start..end).contains(&now_ms) => (start, end),
                    _ => {
                        let found = calendar(*period, tz, now_ms);
                        *last.lock() = Some(found);
                        found
                    }
                };
                Slices {
                    current: start,
                    oldest: start,
                    width: end - start,
                    expires: end,
                }
            }
        }
    }
}

/// The period containing `now_ms` in `tz`, as `[start, end)` in ms.
fn calendar(period: Period, tz: &TimeZone, now_ms: i64) -> (i64, i64) {
    let now = Timestamp::from_millisecond(now_ms).unwrap_or(Timestamp::UNIX_EPOCH);
    let today = now.to_zoned_datetime(tz.clone()).date();
    let (first, next) = match period {
        Period::Day => (Some(today), today.tomorrow().ok()),
        Period::Week => {
            let back = i64::from(today.weekday().to_monday_zero_offset());
            let monday = today.checked_sub(ToSpan::days(back)).ok();
            (
                monday,
                monday.and_then(|m| m.checked_add(1_i64.weeks()).ok()),
            )
        }
        Period::Month => {
            let first = today.first_of_month();
            (Some(first), first.checked_add(1_i64.months()).ok())
        }
    };
    let midnight = |d: Option<Date>| {
        d.and_then(|d| d.to_zoned_datetime(tz.clone()).ok())
            .map(|z| z.timestamp().as_millisecond())
    };
    // Only at the ends of jiff's range (years -9999 and 9999) is there no
    // midnight: count from now to a day later there.
    let start = midnight(first).unwrap_or(now_ms);
    let end = midnight(next).unwrap_or(start + 86_400_000);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn calendar_periods_start_at_midnight_in_their_zone() {
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let now = ms("2026-03-29T00:30:00Z"); // a Sunday, 01:30 in Paris
        let day = Window::calendar(Period::Day, paris.clone()).slices(now);
        // The day the clocks go forward is 23 hours long.
        assert_eq!(day.current, ms("2026-03-28T23:00:00Z"));
        assert_eq!(day.expires, ms("2026-03-29T22:00:00Z"));
        let week = Window::calendar(Period::Week, paris.clone()).slices(now);
        assert_eq!(week.current, ms("2026-03-22T23:00:00Z"));
        assert_eq!(week.expires, ms("2026-03-29T22:00:00Z"));
        let month = Window::calendar(Period::Month, TimeZone::UTC);
        let december = month.slices(ms("2026-12-31T23:59:59.999Z"));
        assert_eq!(december.current, ms("2026-12-01T00:00:00Z"));
        assert_eq!(december.expires, ms("2027-01-01T00:00:00Z"));
        assert_eq!(december.oldest, december.current);
        // The period kept from the last call serves only inside it.
        assert_eq!(month.slices(ms("2026-12-01T00:00:00Z")), december);
        let january = month.slices(ms("2027-01-01T00:00:00Z"));
        assert_eq!(january.current, ms("2027-01-01T00:00:00Z"));
        assert_eq!(january.expires, ms("2027-02-01T00:00:00Z"));
        assert_eq!(
            month.slices(ms("2026-11-30T23:59:59.999Z")).expires,
            december.current
        );
    }

    #[test]
    fn a_rolling_window_counts_sixty_slices() {
        let w = Window::Rolling { ms: 3_600_000 };
        let s = w.slices(7_200_000 + 61_000);
        assert_eq!(s.width, 60_000);
        assert_eq!(s.current, 7_260_000);
        assert_eq!(s.oldest, 7_260_000 - 59 * 60_000);
        // Spend now stops counting an hour after its slice began.
        assert_eq!(s.expires, 7_260_000 + 3_600_000);
        assert_eq!(s.leaves_at(s.oldest), 7_260_000 + 60_000);
    }
}
