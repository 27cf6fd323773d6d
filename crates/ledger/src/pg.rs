//! A batch's two writes on PostgreSQL, each one statement whatever the
//! batch's size: every column is bound as one array and `UNNEST`ed into
//! rows. sqlx prepares a statement once per connection and SQL text, and
//! rows in `VALUES` (as SQLite through sqlx still has them) made a new
//! text for every batch size: up to a hundred statements a connection,
//! each parsed and planned when first met and crowding the others out of
//! the statement cache.

use std::sync::OnceLock;

use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use crate::Record;
use crate::rollup::{Delta, Key};
use crate::store::{BODY_COLUMNS, ON_KEY, RECORD_COLUMNS, rollup_conflict, rollup_head, to_i64};

/// The PostgreSQL type of each of [`RECORD_COLUMNS`], in order.
const RECORD_TYPES: [&str; 25] = [
    "TEXT", "BIGINT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT",
    "BIGINT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "BOOLEAN", "BIGINT", "BIGINT", "BIGINT",
    "BIGINT", "BOOLEAN", "BIGINT", "TEXT", "TEXT",
];

/// The types of the rollups' key columns and sums, in `rollup_head`'s
/// order.
const ROLLUP_TYPES: [&str; 14] = [
    "TEXT", "BIGINT", "TEXT", "TEXT", "TEXT", "TEXT", "BIGINT", "BIGINT", "BIGINT", "BIGINT",
    "BIGINT", "BIGINT", "BIGINT", "BIGINT",
];

/// `SELECT * FROM UNNEST($1::T1[], $2::T2[], …)`.
fn unnest(types: &[&str]) -> String {
    let arrays: Vec<String> = types
        .iter()
        .enumerate()
        .map(|(i, t)| format!("${}::{t}[]", i + 1))
        .collect();
    format!("SELECT * FROM UNNEST({})", arrays.join(", "))
}

/// The records' INSERT.
fn records_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "INSERT INTO usage_records ({RECORD_COLUMNS}) {}{ON_KEY} RETURNING uid",
            unnest(&RECORD_TYPES)
        )
    })
}

/// The rollups' upsert.
fn rollups_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "{}{}{}",
            rollup_head(),
            unnest(&ROLLUP_TYPES),
            rollup_conflict()
        )
    })
}

/// One column of `rows`, as the array bound for it.
fn column<'r, R, T>(rows: &'r [R], f: impl Fn(&'r R) -> T) -> Vec<T> {
    rows.iter().map(f).collect()
}

/// Inserts the records of `records` whose key is not stored yet into
/// `usage_records`, returning the keys it stored.
pub(crate) fn insert_records(records: &[Record]) -> Query<'_, Postgres, PgArguments> {
    let r = records;
    sqlx::query(records_sql())
        .bind(column(r, |r| r.key().into_owned()))
        .bind(column(r, |r| r.at_ms))
        .bind(column(r, |r| r.request_id.as_str()))
        .bind(column(r, |r| r.tenant.as_str()))
        .bind(column(r, |r| r.key_id.as_deref()))
        .bind(column(r, |r| r.user.as_deref()))
        .bind(column(r, |r| r.feature.as_deref()))
        .bind(column(r, |r| r.kind.as_str()))
        .bind(column(r, |r| r.provider.as_str()))
        .bind(column(r, |r| r.model.as_str()))
        .bind(column(r, |r| r.endpoint.as_str()))
        .bind(column(r, |r| i64::from(r.status)))
        .bind(column(r, |r| to_i64(r.prompt_tokens)))
        .bind(column(r, |r| to_i64(r.completion_tokens)))
        .bind(column(r, |r| to_i64(r.cached_tokens)))
        .bind(column(r, |r| to_i64(r.reasoning_tokens)))
        .bind(column(r, |r| r.estimated))
        .bind(column(r, |r| to_i64(r.cost_nanos)))
        .bind(column(r, |r| to_i64(r.latency_ms)))
        .bind(column(r, |r| to_i64(r.queue_ms)))
        .bind(column(r, |r| i64::from(r.retries)))
        .bind(column(r, |r| r.cache_hit))
        .bind(column(r, |r| i64::from(r.unpriced)))
        .bind(column(r, |r| r.alias.as_deref()))
        .bind(column(r, |r| r.deployment.as_deref()))
}

/// The types of [`BODY_COLUMNS`], in order.
const BODY_TYPES: [&str; 6] = ["TEXT", "BIGINT", "TEXT", "BIGINT", "TEXT", "BIGINT"];

/// The bodies' INSERT.
fn bodies_sql() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "INSERT INTO usage_bodies ({BODY_COLUMNS}) {}{ON_KEY}",
            unnest(&BODY_TYPES)
        )
    })
}

/// Inserts the bodies of `records` (records that carry some), each once.
pub(crate) fn insert_bodies<'a>(records: &[&'a Record]) -> Query<'a, Postgres, PgArguments> {
    let r = records;
    // Every record here carries bodies (see `with_bodies`).
    let b = move |r: &'a Record| -> (&'a str, i64, &'a str, i64) {
        match &r.bodies {
            Some(b) => (
                b.request.as_str(),
                to_i64(b.request_bytes),
                b.response.as_str(),
                to_i64(b.response_bytes),
            ),
            None => ("", 0, "", 0),
        }
    };
    sqlx::query(bodies_sql())
        .bind(column(r, |r| r.key().into_owned()))
        .bind(column(r, |r| r.at_ms))
        .bind(column(r, |r| b(r).0))
        .bind(column(r, |r| b(r).1))
        .bind(column(r, |r| b(r).2))
        .bind(column(r, |r| b(r).3))
}

/// Adds `rollups` to `usage_rollups` (each key once: `deltas` sums a
/// batch by key, as `ON CONFLICT DO UPDATE` needs).
pub(crate) fn upsert_rollups<'a>(
    rollups: &'a [(Key<'a>, Delta)],
) -> Query<'a, Postgres, PgArguments> {
    let r = rollups;
    sqlx::query(rollups_sql())
        .bind(column(r, |(k, _)| k.granularity))
        .bind(column(r, |(k, _)| k.bucket_ms))
        .bind(column(r, |(k, _)| k.tenant))
        .bind(column(r, |(k, _)| k.key_id))
        .bind(column(r, |(k, _)| k.model))
        .bind(column(r, |(k, _)| k.feature))
        .bind(column(r, |(_, d)| to_i64(d.requests)))
        .bind(column(r, |(_, d)| to_i64(d.errors)))
        .bind(column(r, |(_, d)| to_i64(d.prompt_tokens)))
        .bind(column(r, |(_, d)| to_i64(d.completion_tokens)))
        .bind(column(r, |(_, d)| to_i64(d.cached_tokens)))
        .bind(column(r, |(_, d)| to_i64(d.reasoning_tokens)))
        .bind(column(r, |(_, d)| to_i64(d.unpriced)))
        .bind(column(r, |(_, d)| to_i64(d.cost_nanos)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The arrays line up with the columns they fill.
    #[test]
    fn one_array_per_column() {
        assert_eq!(RECORD_COLUMNS.split(", ").count(), RECORD_TYPES.len());
        assert_eq!(rollup_head().matches(", ").count() + 1, ROLLUP_TYPES.len());
        assert!(records_sql().contains("$25::TEXT[]) ON CONFLICT (uid) DO NOTHING"));
        assert!(rollups_sql().contains("$14::BIGINT[]) ON CONFLICT"));
        assert_eq!(BODY_COLUMNS.split(", ").count(), BODY_TYPES.len());
        assert!(bodies_sql().contains("$6::BIGINT[]) ON CONFLICT (uid) DO NOTHING"));
    }
}
