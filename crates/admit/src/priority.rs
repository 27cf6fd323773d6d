//! Priority classes.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::error::ParsePriorityError;

/// A priority class. Classes are served in strict order — `High` before
/// `Normal` before `Low` — except that the starvation guard
/// ([`QueueConfig::starvation_guard`](crate::QueueConfig::starvation_guard))
/// hands a waiting class a dispatch after it has been passed over a bounded
/// number of times in a row.
///
/// The seed's classification: fast-tier traffic (greetings, lookups) is
/// `High`, tool calls and general requests `Normal`, research and background
/// work `Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Interactive, quick requests.
    High,
    /// The default.
    #[default]
    Normal,
    /// Background work that may wait.
    Low,
}

impl Priority {
    /// Every class, highest first.
    pub const ALL: [Priority; 3] = [Priority::High, Priority::Normal, Priority::Low];

    /// The lowercase name, as parsed.
    pub const fn as_str(self) -> &'static str {
        match self {
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// 0 for `High`, 1 for `Normal`, 2 for `Low`.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = ParsePriorityError;

    /// Parses `high`, `normal` or `low`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| ParsePriorityError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_rejects_others_by_name() {
        assert_eq!("high".parse(), Ok(Priority::High));
        assert_eq!("Normal".parse(), Ok(Priority::Normal));
        assert_eq!("LOW".parse(), Ok(Priority::Low));
        let err = "urgent".parse::<Priority>().unwrap_err();
        assert_eq!(err, ParsePriorityError("urgent".into()));
        assert!(err.to_string().contains("\"urgent\""), "{err}");
    }

    #[test]
    fn display_round_trips_and_order_is_strict() {
        for p in Priority::ALL {
            assert_eq!(p.to_string().parse(), Ok(p));
        }
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
        assert_eq!(Priority::ALL.map(Priority::index), [0, 1, 2]);
    }
}
