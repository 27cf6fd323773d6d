//! [`Direct`]: a SQLite file's writes on the writer's own thread.
//!
//! sqlx runs each SQLite connection on a thread of its own and hands it
//! every statement over a channel: a batch of records cost a round trip
//! (two context switches and their wake-ups) per statement, statements
//! rebuilt and re-bound with copied strings per batch, and a multi-row
//! INSERT whose text changes with the batch's size, so that SQLite
//! compiled most of them again. Here the writer's thread runs SQLite
//! itself (rusqlite, on the one libsqlite3 sqlx links): one transaction
//! per batch, statements prepared once and kept across batches (INSERTs
//! of 16 records and of one, the rollups' upsert), values bound from the
//! records in place. Reads, purges, PostgreSQL and in-memory SQLite stay
//! with sqlx.
//!
//! Durability is sqlx's: the file is in WAL mode (set when the pool
//! opened it), `synchronous` is FULL (SQLite's default, which sqlx
//! keeps), and a batch is stored when its commit returns.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rusqlite::types::ToSql;
use rusqlite::{Connection, Statement, TransactionBehavior, params};

use crate::rollup::deltas;
use crate::store::{
    BODY_COLUMNS, ON_KEY, RECORD_COLUMNS, rollup_conflict, rollup_head, stored, to_i64, with_bodies,
};
use crate::{Error, Record};

/// Statements kept prepared: the four of a batch, with room to spare.
const STATEMENTS: usize = 5;

/// Records per INSERT, but for a batch's last few, inserted one by one:
/// two statements whatever the batch's size, so both stay prepared.
/// Each statement also updates `sqlite_sequence` (the ids'
/// AUTOINCREMENT) once: per record for single-row INSERTs.
const RECORDS_PER_INSERT: usize = 16;

/// The columns of a record, as [`RECORD_COLUMNS`] lists them.
const COLUMNS: usize = 25;

/// The writing connection to a ledger's SQLite file; closed by
/// [`Direct::close`] (writes then fail, as sqlx's on a closed pool).
#[derive(Debug, Clone)]
pub(crate) struct Direct(Arc<Mutex<Option<Connection>>>);

impl Direct {
    /// Opens the file at `path` (already created and migrated through
    /// sqlx), waiting up to 10 s for another writer as sqlx's pool does.
    pub(crate) fn open(path: &Path) -> Result<Direct, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        // As sqlx's connections have them: FULL is SQLite's default,
        // said here so that a commit stays durable whatever the build's.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.set_prepared_statement_cache_capacity(STATEMENTS);
        Ok(Direct(Arc::new(Mutex::new(Some(conn)))))
    }

    /// Closes the connection (later writes fail).
    pub(crate) fn close(&self) {
        drop(self.lock().take());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Connection>> {
        // A panic inside a batch leaves its transaction to roll back on
        // drop: the connection is still sound.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores the records of `records` whose key is not stored yet and
    /// adds them to the rollups, in one transaction, on the calling
    /// thread (it blocks: see [`crate::LedgerStore::insert`]); returns
    /// how many were new.
    pub(crate) fn insert(&self, records: &[Record]) -> Result<u64, Error> {
        let mut guard = self.lock();
        let conn = guard.as_mut().ok_or(Error::Closed)?;
        // IMMEDIATE: the write lock is taken (or waited for) up front,
        // never upgraded mid-batch where SQLite could only fail.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut fresh: Vec<&Record> = Vec::with_capacity(records.len());
        {
            let mut chunks = records.chunks_exact(RECORDS_PER_INSERT);
            if chunks.len() > 0 {
                let mut insert = tx.prepare_cached(insert_records(RECORDS_PER_INSERT))?;
                for chunk in &mut chunks {
                    for (i, r) in chunk.iter().enumerate() {
                        bind(&mut insert, i, r)?;
                    }
                    let mut keys = Vec::with_capacity(RECORDS_PER_INSERT);
                    let mut rows = insert.raw_query();
                    while let Some(row) = rows.next()? {
                        keys.push(row.get::<_, String>(0)?);
                    }
                    stored(chunk, keys, &mut fresh);
                }
            }
            if !chunks.remainder().is_empty() {
                let mut insert = tx.prepare_cached(insert_records(1))?;
                for r in chunks.remainder() {
                    bind(&mut insert, 0, r)?;
                    // 0 rows changed: its key was stored already.
                    if insert.raw_execute()? == 1 {
                        fresh.push(r);
                    }
                }
            }
            let mut upsert = tx.prepare_cached(upsert_rollup())?;
            for (k, d) in deltas(fresh.iter().copied()) {
                upsert.execute(params![
                    k.granularity,
                    k.bucket_ms,
                    k.tenant,
                    k.key_id,
                    k.model,
                    k.feature,
                    to_i64(d.requests),
                    to_i64(d.errors),
                    to_i64(d.prompt_tokens),
                    to_i64(d.completion_tokens),
                    to_i64(d.cached_tokens),
                    to_i64(d.reasoning_tokens),
                    to_i64(d.unpriced),
                    to_i64(d.cost_nanos),
                ])?;
            }
            let bodies = with_bodies(&fresh);
            if !bodies.is_empty() {
                let mut insert = tx.prepare_cached(insert_bodies())?;
                for (r, b) in bodies
                    .iter()
                    .filter_map(|r| r.bodies.as_ref().map(|b| (r, b)))
                {
                    insert.execute(params![
                        r.key().as_ref(),
                        r.at_ms,
                        b.request,
                        to_i64(b.request_bytes),
                        b.response,
                        to_i64(b.response_bytes),
                    ])?;
                }
            }
        }
        // On failure the transaction rolls back as it drops: none stored.
        tx.commit()?;
        Ok(fresh.len() as u64)
    }
}

/// Binds `r` as the `row`th (from 0) of `insert`'s rows.
fn bind(insert: &mut Statement<'_>, row: usize, r: &Record) -> rusqlite::Result<()> {
    let key = r.key();
    let values: [&dyn ToSql; COLUMNS] = [
        &key.as_ref(),
        &r.at_ms,
        &r.request_id,
        &r.tenant,
        &r.key_id,
        &r.user,
        &r.feature,
        &r.kind,
        &r.provider,
        &r.model,
        &r.endpoint,
        &i64::from(r.status),
        &to_i64(r.prompt_tokens),
        &to_i64(r.completion_tokens),
        &to_i64(r.cached_tokens),
        &to_i64(r.reasoning_tokens),
        &r.estimated,
        &to_i64(r.cost_nanos),
        &to_i64(r.latency_ms),
        &to_i64(r.queue_ms),
        &i64::from(r.retries),
        &r.cache_hit,
        &i64::from(r.unpriced),
        &r.alias,
        &r.deployment,
    ];
    for (j, v) in values.iter().enumerate() {
        insert.raw_bind_parameter(row * COLUMNS + j + 1, v)?;
    }
    Ok(())
}

/// `INSERT INTO usage_records (…) VALUES (?1, …), … ON CONFLICT (uid) DO
/// NOTHING`: `rows` records (1 or [`RECORDS_PER_INSERT`]). The chunk's
/// returns the keys it stored; the single record's tells by its count of
/// rows changed.
fn insert_records(rows: usize) -> &'static str {
    static ONE: OnceLock<String> = OnceLock::new();
    static CHUNK: OnceLock<String> = OnceLock::new();
    let sql = |rows: usize| {
        let rows: Vec<String> = (0..rows)
            .map(|i| format!("({})", placeholders(i * COLUMNS, COLUMNS)))
            .collect();
        format!(
            "INSERT INTO usage_records ({RECORD_COLUMNS}) VALUES {}{ON_KEY}{}",
            rows.join(", "),
            if rows.len() == 1 {
                ""
            } else {
                " RETURNING uid"
            }
        )
    };
    if rows == 1 {
        ONE.get_or_init(|| sql(1))
    } else {
        debug_assert_eq!(rows, RECORDS_PER_INSERT);
        CHUNK.get_or_init(|| sql(RECORDS_PER_INSERT))
    }
}

/// The bodies' INSERT, one record's.
fn insert_bodies() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "INSERT INTO usage_bodies ({BODY_COLUMNS}) VALUES ({}){ON_KEY}",
            placeholders(0, 6)
        )
    })
}

/// The rollups' upsert, one row.
fn upsert_rollup() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "{} VALUES ({}){}",
            rollup_head(),
            placeholders(0, 6 + crate::SUMS.len()),
            rollup_conflict()
        )
    })
}

/// `?{from + 1}, …, ?{from + n}`.
fn placeholders(from: usize, n: usize) -> String {
    (from + 1..=from + n)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statements_bind_what_the_columns_list() {
        assert_eq!(RECORD_COLUMNS.split(',').count(), COLUMNS);
        let one = insert_records(1);
        assert!(one.ends_with(&format!("?{COLUMNS}){ON_KEY}")), "{one}");
        let chunk = insert_records(RECORDS_PER_INSERT);
        let last = RECORDS_PER_INSERT * COLUMNS;
        assert!(
            chunk.ends_with(&format!("?{last}){ON_KEY} RETURNING uid")),
            "{chunk}"
        );
        assert_eq!(chunk.matches('(').count(), RECORDS_PER_INSERT + 2);
        assert!(upsert_rollup().contains(&format!("?{})", 6 + crate::SUMS.len())));
    }
}
