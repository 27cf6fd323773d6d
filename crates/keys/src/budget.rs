//! Budgets: how much a tier's, tenant's or key's calls may spend — money,
//! tokens and/or requests — over a calendar period (a day, a week, a
//! month, in a time zone) or a rolling window. This module only says what
//! a budget is and checks it; counting spend against it is
//! `sluice_usage::budget`'s.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::model::validate_name;

/// A calendar period, starting at midnight in the budget's time zone:
/// days, weeks (from Monday) or months (from the 1st).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    /// From midnight to midnight.
    Day,
    /// From Monday midnight to the next.
    Week,
    /// From the 1st at midnight to the next 1st.
    Month,
}

impl Period {
    /// As written in the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }
}

/// An amount of money in nanodollars, written in dollars as a decimal
/// string (`"25"`, `"0.50"`, at most nine decimals) or a JSON number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Money(u64);

impl Money {
    /// `n` nanodollars.
    pub const fn from_nanodollars(n: u64) -> Money {
        Money(n)
    }

    /// In nanodollars.
    pub const fn nanodollars(self) -> u64 {
        self.0
    }

    /// Dollars written as a decimal (`"25"`, `"0.50"`, `"$3"`).
    ///
    /// # Errors
    /// Why it does not read, for the caller to put after the field's name.
    pub fn parse_dollars(s: &str) -> Result<Money, String> {
        let t = s.trim();
        let t = t.strip_prefix('$').unwrap_or(t);
        let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
        let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || !(frac.is_empty() || digits(frac)) {
            return Err(format!(
                "must be dollars as a decimal number (\"25.00\"), not {s:?}"
            ));
        }
        if frac.len() > 9 {
            return Err(format!("at most nine decimals (a nanodollar), not {s:?}"));
        }
        let too_large = || format!("too large: {s:?}");
        let whole: u64 = whole.parse().map_err(|_| too_large())?;
        let frac: u64 = format!("{frac:0<9}").parse().map_err(|_| too_large())?;
        whole
            .checked_mul(1_000_000_000)
            .and_then(|w| w.checked_add(frac))
            .map(Money)
            .ok_or_else(too_large)
    }
}

impl fmt::Display for Money {
    /// Dollars without trailing zeros: `25`, `0.5`, `0.000000001`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1_000_000_000, self.0 % 1_000_000_000);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let frac = format!("{frac:09}");
        write!(f, "{whole}.{}", frac.trim_end_matches('0'))
    }
}

impl Serialize for Money {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Money, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(serde_json::Number),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Text(s) => s,
            Raw::Number(n) => n.to_string(),
        };
        Money::parse_dollars(&text).map_err(serde::de::Error::custom)
    }
}

/// A budget of a tier, tenant or key. At least one of `money`, `tokens`
/// and `requests`; exactly one of `period` and `window_seconds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Its name, unique among its owner's (`monthly`): refusals name it.
    pub name: String,
    /// The most the calls may cost, at the gateway's prices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub money: Option<Money>,
    /// The most tokens (prompt and completion) the calls may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The most calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// A calendar period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<Period>,
    /// The period's time zone (IANA, `Europe/Paris`); UTC if none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A rolling window instead of a calendar period, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u64>,
}

/// The most budgets one tier, tenant or key may have.
pub const MAX_BUDGETS: usize = 16;
/// The shortest rolling window.
pub const MIN_WINDOW_SECONDS: u64 = 60;
/// The longest rolling window: a leap year.
pub const MAX_WINDOW_SECONDS: u64 = 366 * 86_400;

impl Budget {
    /// Checks it; `field` is its place in the request (`budgets[0]`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the bad field (`budgets[0].time_zone`).
    pub fn validate(&self, field: &str) -> Result<(), Error> {
        let at = |f: &str| format!("{field}.{f}");
        validate_name(&at("name"), &self.name)?;
        if self.money.is_none() && self.tokens.is_none() && self.requests.is_none() {
            return Err(Error::invalid(field, "set money, tokens or requests"));
        }
        if self.money == Some(Money(0)) {
            return Err(Error::invalid(at("money"), "must be above 0"));
        }
        for (name, v) in [("tokens", self.tokens), ("requests", self.requests)] {
            if v == Some(0) {
                return Err(Error::invalid(at(name), "must be at least 1"));
            }
        }
        match (self.period, self.window_seconds) {
            (None, None) => {
                return Err(Error::invalid(
                    at("period"),
                    "set a period (day, week, month) or window_seconds",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    at("window_seconds"),
                    "a budget has a period or a rolling window, not both",
                ));
            }
            (None, Some(w)) => {
                if !(MIN_WINDOW_SECONDS..=MAX_WINDOW_SECONDS).contains(&w) {
                    return Err(Error::invalid(
                        at("window_seconds"),
                        format!("must be from {MIN_WINDOW_SECONDS} to {MAX_WINDOW_SECONDS}"),
                    ));
                }
                if self.time_zone.is_some() {
                    return Err(Error::invalid(
                        at("time_zone"),
                        "only a calendar period has a time zone",
                    ));
                }
            }
            (Some(_), None) => {
                if let Some(tz) = &self.time_zone {
                    jiff::tz::TimeZone::get(tz).map_err(|_| {
                        Error::invalid(
                            at("time_zone"),
                            format!("unknown time zone {tz:?} (an IANA name such as Europe/Paris)"),
                        )
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// Checks a list of budgets, named `field` (`budgets`).
///
/// # Errors
/// [`Error::Invalid`] naming the first bad one's field.
pub fn validate_budgets(field: &str, budgets: &[Budget]) -> Result<(), Error> {
    if budgets.len() > MAX_BUDGETS {
        return Err(Error::invalid(field, format!("at most {MAX_BUDGETS}")));
    }
    for (i, b) in budgets.iter().enumerate() {
        b.validate(&format!("{field}[{i}]"))?;
        if budgets[..i].iter().any(|o| o.name == b.name) {
            return Err(Error::invalid(
                format!("{field}[{i}].name"),
                format!("{:?} is named twice", b.name),
            ));
        }
    }
    Ok(())
}

/// `own` budgets, then those of `tier` that `own` does not name: a
/// tenant's or key's own budget of a name wins over its tier's.
pub fn budgets_over(own: &[Budget], tier: &[Budget]) -> Vec<Budget> {
    let mut out = own.to_vec();
    out.extend(
        tier.iter()
            .filter(|t| !own.iter().any(|o| o.name == t.name))
            .cloned(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(json: &str) -> Budget {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn money_reads_dollars_exactly() {
        let m = |s: &str| Money::parse_dollars(s).map(Money::nanodollars);
        assert_eq!(m("25"), Ok(25_000_000_000));
        assert_eq!(m("0.5"), Ok(500_000_000));
        assert_eq!(m("$0.000000001"), Ok(1));
        assert!(m("0.0000000001").unwrap_err().contains("nine decimals"));
        assert!(m("-1").is_err() && m("1e3").is_err() && m("").is_err());
        assert!(m("99999999999999999999").unwrap_err().contains("too large"));
        let b = budget(r#"{"name": "m", "money": 12.25, "period": "month"}"#);
        assert_eq!(b.money, Some(Money(12_250_000_000)));
        assert_eq!(Money(12_250_000_000).to_string(), "12.25");
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"name":"m","money":"12.25","period":"month"}"#
        );
    }

    #[test]
    fn errors_name_the_field() {
        let field = |json: &str| match validate_budgets("budgets", &[budget(json)]) {
            Err(Error::Invalid { field, .. }) => field,
            other => panic!("{json}: {other:?}"),
        };
        assert_eq!(field(r#"{"name": "m", "period": "day"}"#), "budgets[0]");
        assert_eq!(
            field(r#"{"name": "m", "tokens": 0, "period": "day"}"#),
            "budgets[0].tokens"
        );
        assert_eq!(
            field(r#"{"name": "m", "requests": 5}"#),
            "budgets[0].period"
        );
        assert_eq!(
            field(r#"{"name": "m", "requests": 5, "period": "day", "window_seconds": 60}"#),
            "budgets[0].window_seconds"
        );
        assert_eq!(
            field(r#"{"name": "m", "requests": 5, "window_seconds": 59}"#),
            "budgets[0].window_seconds"
        );
        assert_eq!(
            field(r#"{"name": "m", "requests": 5, "period": "day", "time_zone": "Mars/Olympus"}"#),
            "budgets[0].time_zone"
        );
        assert_eq!(
            field(r#"{"name": "a b", "requests": 5, "period": "day"}"#),
            "budgets[0].name"
        );
        let ok = budget(
            r#"{"name": "m", "requests": 5, "period": "week", "time_zone": "Europe/Paris"}"#,
        );
        assert!(ok.validate("b").is_ok());
        let twice = validate_budgets("budgets", &[ok.clone(), ok]).unwrap_err();
        assert!(twice.to_string().starts_with("budgets[1].name:"), "{twice}");
        let e = serde_json::from_str::<Budget>(r#"{"name": "m", "period": "year"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `year`"), "{e}");
    }

    #[test]
    fn own_budgets_win_over_the_tier_by_name() {
        let own = [budget(r#"{"name": "m", "requests": 5, "period": "day"}"#)];
        let tier = [
            budget(r#"{"name": "m", "requests": 50, "period": "day"}"#),
            budget(r#"{"name": "t", "tokens": 50, "window_seconds": 3600}"#),
        ];
        let got = budgets_over(&own, &tier);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].requests, got[1].name.as_str()), (Some(5), "t"));
    }
}
