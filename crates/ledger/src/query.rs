//! Reading the ledger: rollups grouped by the dimensions asked for, and
//! raw totals.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The width of a rollup bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    /// Per UTC minute (kept as long as the raw records).
    Minute,
    /// Per UTC hour.
    Hour,
    /// Per UTC day.
    Day,
    /// One sum over the whole range, read from the minute rollups.
    Total,
}

impl Granularity {
    /// The widths kept in the rollup table.
    pub const STORED: [Granularity; 3] = [Granularity::Minute, Granularity::Hour, Granularity::Day];

    /// The bucket's width in milliseconds (`Total` reads minutes).
    pub const fn millis(self) -> i64 {
        match self {
            Granularity::Minute | Granularity::Total => 60_000,
            Granularity::Hour => 3_600_000,
            Granularity::Day => 86_400_000,
        }
    }

    /// The start of the bucket holding `at_ms`.
    pub const fn bucket(self, at_ms: i64) -> i64 {
        at_ms - at_ms.rem_euclid(self.millis())
    }

    /// As the rollup table and the API name it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Granularity::Minute => "minute",
            Granularity::Hour => "hour",
            Granularity::Day => "day",
            Granularity::Total => "total",
        }
    }

    /// The rollup rows it reads.
    pub(crate) const fn stored(self) -> Granularity {
        match self {
            Granularity::Total => Granularity::Minute,
            g => g,
        }
    }
}

impl fmt::Display for Granularity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Granularity {
    type Err = String;

    fn from_str(s: &str) -> Result<Granularity, String> {
        match s {
            "minute" => Ok(Granularity::Minute),
            "hour" => Ok(Granularity::Hour),
            "day" => Ok(Granularity::Day),
            "total" => Ok(Granularity::Total),
            _ => Err(format!("must be minute, hour, day or total, not {s:?}")),
        }
    }
}

/// What rollups can be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dim {
    /// The tenant.
    Tenant,
    /// The API key's id (`""` for callers without one).
    Key,
    /// The model (or API, or job kind).
    Model,
    /// The feature (`""` for calls without one).
    Feature,
}

impl Dim {
    /// Every dimension, in the order columns are shown.
    pub const ALL: [Dim; 4] = [Dim::Tenant, Dim::Key, Dim::Model, Dim::Feature];

    /// Its column in the rollup table.
    pub(crate) const fn column(self) -> &'static str {
        match self {
            Dim::Tenant => "tenant",
            Dim::Key => "key_id",
            Dim::Model => "model",
            Dim::Feature => "feature",
        }
    }

    /// As the API names it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Dim::Tenant => "tenant",
            Dim::Key => "key",
            Dim::Model => "model",
            Dim::Feature => "feature",
        }
    }
}

impl FromStr for Dim {
    type Err = String;

    fn from_str(s: &str) -> Result<Dim, String> {
        Dim::ALL
            .into_iter()
            .find(|d| d.as_str() == s)
            .ok_or_else(|| format!("must be tenant, key, model or feature, not {s:?}"))
    }
}

/// Which rollups to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Buckets starting at or after this, ms since the Unix epoch.
    pub from_ms: i64,
    /// Buckets starting before this.
    pub to_ms: i64,
    /// The bucket width (`Total`: one sum per group).
    pub granularity: Granularity,
    /// The dimensions to group by (none: one sum per bucket).
    pub group_by: Vec<Dim>,
    /// Only this tenant's calls.
    pub tenant: Option<String>,
    /// At most this many rows (at most [`Query::MAX_ROWS`]).
    pub limit: usize,
}

impl Query {
    /// The most rows one query returns.
    pub const MAX_ROWS: usize = 10_000;

    /// Every tenant between `from_ms` and `to_ms`, no grouping.
    pub fn new(from_ms: i64, to_ms: i64, granularity: Granularity) -> Query {
        Query {
            from_ms,
            to_ms,
            granularity,
            group_by: Vec::new(),
            tenant: None,
            limit: Query::MAX_ROWS,
        }
    }

    /// Grouped by `dims`.
    #[must_use]
    pub fn group_by(mut self, dims: impl IntoIterator<Item = Dim>) -> Query {
        self.group_by = dims.into_iter().collect();
        self.group_by.sort_unstable();
        self.group_by.dedup();
        self
    }

    /// Only `tenant`'s calls.
    #[must_use]
    pub fn tenant(mut self, tenant: impl Into<String>) -> Query {
        self.tenant = Some(tenant.into());
        self
    }
}

/// One group of one bucket.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Row {
    /// The bucket's start (absent for `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_ms: Option<i64>,
    /// The tenant, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The key id, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The model, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The feature, when grouped by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature: Option<String>,
    /// Calls.
    pub requests: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// Calls of a model without a price: their cost is unknown, not 0.
    pub unpriced: u64,
    /// Nanodollars.
    pub cost_nanos: u64,
}

/// The columns a usage [`Row`] sums, as the ledger's tables, the usage
/// API's JSON and `sluice usage` name them, in that order: the counts,
/// then the cost (`cost_nanos`), last.
pub const SUMS: [&str; 8] = [
    "requests",
    "errors",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "unpriced",
    "cost_nanos",
];

impl Row {
    /// The value of `dim` in this row.
    pub fn dim(&self, dim: Dim) -> Option<&str> {
        match dim {
            Dim::Tenant => self.tenant.as_deref(),
            Dim::Key => self.key.as_deref(),
            Dim::Model => self.model.as_deref(),
            Dim::Feature => self.feature.as_deref(),
        }
    }
}

/// Sums over raw records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Totals {
    /// Records.
    pub records: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
    /// Calls of a model without a price.
    pub unpriced: u64,
    /// Nanodollars.
    pub cost_nanos: u64,
}

#[cfg(test)]
mod sums {
    use super::{Row, SUMS};

    #[test]
    fn every_sum_is_a_field_of_a_row_and_the_cost_comes_last() {
        let row = serde_json::to_value(Row::default()).expect("a row serializes");
        for s in SUMS {
            assert!(row[s].is_u64(), "{s} is not a counted field of Row: {row}");
        }
        assert_eq!(SUMS.last(), Some(&"cost_nanos"));
    }
}
