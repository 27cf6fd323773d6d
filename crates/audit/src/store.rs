//! [`AuditStore`]: the `audit_log` table in SQLite or PostgreSQL, with its
//! schema embedded and its own migrations table (the job and key stores
//! may share the database).

use std::path::Path;

use serde_json::Value;
use sluice_store::{Pool, PoolOptions, Schema, Step};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row};

use crate::{Entry, Error, Filter, NewEntry};

const MIGRATIONS_TABLE: &str = "_sluice_audit_migrations";

const SQLITE: Schema = Schema::new(&[Step::new(
    1,
    "audit log",
    include_str!("../migrations/sqlite/0001_audit.sql"),
)])
.table(MIGRATIONS_TABLE);

const POSTGRES: Schema = Schema::new(&[Step::new(
    1,
    "audit log",
    include_str!("../migrations/postgres/0001_audit.sql"),
)])
.table(MIGRATIONS_TABLE);

/// Rows per INSERT statement (well under both engines' bind limits:
/// seven binds a row).
const ROWS_PER_INSERT: usize = 200;

/// Two connections: one background writer, and the audit API's reads.
const POOL: PoolOptions = PoolOptions::new(2);

/// The audit trail's table. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct AuditStore {
    db: Pool,
}

impl AuditStore {
    /// Opens (creating if needed) the SQLite file at `path` in WAL mode
    /// and brings its tables up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the file cannot be opened or the schema
    /// cannot be migrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<AuditStore, Error> {
        let pool = SQLITE.open_sqlite(path, POOL).await?;
        Ok(AuditStore {
            db: Pool::Sqlite(pool),
        })
    }

    /// A store in a private in-memory SQLite database.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn in_memory() -> Result<AuditStore, Error> {
        let pool = SQLITE.sqlite_in_memory(POOL).await?;
        Ok(AuditStore {
            db: Pool::Sqlite(pool),
        })
    }

    /// Connects to PostgreSQL at `url` (a pool of up to 2 connections)
    /// and brings its tables up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the URL is bad, the server unreachable or
    /// the schema cannot be migrated.
    pub async fn connect(url: &str) -> Result<AuditStore, Error> {
        let pool = POSTGRES.connect_postgres(url, POOL).await?;
        Ok(AuditStore {
            db: Pool::Postgres(pool),
        })
    }

    /// Closes the pool, waiting for connections in use.
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// Stores `entries` in one transaction, in order.
    ///
    /// # Errors
    /// [`Error::Database`]; then none of them is stored.
    pub async fn insert(&self, entries: &[NewEntry]) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        match &self.db {
            Pool::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in entries.chunks(ROWS_PER_INSERT) {
                    insert_query(chunk).build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in entries.chunks(ROWS_PER_INSERT) {
                    insert_query(chunk).build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
        }
        Ok(())
    }

    /// Deletes the entries recorded before `before_ms` (milliseconds
    /// since the Unix epoch): the trail's retention. Returns how many.
    ///
    /// # Errors
    /// [`Error::Database`]; then none is deleted.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, Error> {
        let deleted = match &self.db {
            Pool::Sqlite(pool) => sqlx::query("DELETE FROM audit_log WHERE at_ms < ?")
                .bind(before_ms)
                .execute(pool)
                .await?
                .rows_affected(),
            Pool::Postgres(pool) => sqlx::query("DELETE FROM audit_log WHERE at_ms < $1")
                .bind(before_ms)
                .execute(pool)
                .await?
                .rows_affected(),
        };
        Ok(deleted)
    }

    /// The entries `filter` selects, newest first.
    ///
    /// # Errors
    /// [`Error::Database`], or [`Error::Corrupt`] for a row this version
    /// cannot read.
    pub async fn query(&self, filter: &Filter) -> Result<Vec<Entry>, Error> {
        match &self.db {
            Pool::Sqlite(pool) => {
                let rows = select(filter).build().fetch_all(pool).await?;
                rows.iter().map(decode_sqlite).collect()
            }
            Pool::Postgres(pool) => {
                let rows = select(filter).build().fetch_all(pool).await?;
                rows.iter().map(decode_pg).collect()
            }
        }
    }
}

fn json_text(v: &Option<Value>) -> Option<String> {
    v.as_ref().map(Value::to_string)
}

fn insert_query<DB>(chunk: &[NewEntry]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    Option<String>: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(
        "INSERT INTO audit_log (at_ms, actor, kind, target, before, after, request_id) ",
    );
    q.push_values(chunk, |mut b, e| {
        b.push_bind(e.at_ms)
            .push_bind(e.actor.clone())
            .push_bind(e.kind.clone())
            .push_bind(e.target.clone())
            .push_bind(json_text(&e.before))
            .push_bind(json_text(&e.after))
            .push_bind(e.request_id.clone());
    });
    q
}

fn select<DB>(f: &Filter) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(
        "SELECT id, at_ms, actor, kind, target, before, after, request_id FROM audit_log WHERE 1 = 1",
    );
    if let Some(from) = f.from_ms {
        q.push(" AND at_ms >= ").push_bind(from);
    }
    if let Some(to) = f.to_ms {
        q.push(" AND at_ms < ").push_bind(to);
    }
    if let Some(actor) = &f.actor {
        q.push(" AND actor = ").push_bind(actor.clone());
    }
    if let Some(kind) = &f.kind {
        // `key` selects `key` and `key.*`: a prefix compare, not LIKE
        // (whose `_` and `%` a kind could hold).
        q.push(" AND (kind = ")
            .push_bind(kind.clone())
            // A length the gateway computed, not input: written inline
            // (PostgreSQL has no substr(text, int, bigint)).
            .push(format!(" OR substr(kind, 1, {}) = ", kind.len() + 1))
            .push_bind(format!("{kind}."))
            .push(")");
    }
    if let Some(id) = f.before_id {
        q.push(" AND id < ").push_bind(id);
    }
    let limit = i64::from(f.limit.clamp(1, Filter::MAX_LIMIT));
    q.push(" ORDER BY id DESC LIMIT ").push_bind(limit);
    q
}

fn parse_json(s: Option<String>, col: &str) -> Result<Option<Value>, Error> {
    s.map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| Error::Corrupt(format!("audit_log.{col}: {e}")))
}

macro_rules! decode {
    ($name:ident, $row:ty) => {
        fn $name(r: &$row) -> Result<Entry, Error> {
            Ok(Entry {
                id: r.try_get("id")?,
                at_ms: r.try_get("at_ms")?,
                actor: r.try_get("actor")?,
                kind: r.try_get("kind")?,
                target: r.try_get("target")?,
                before: parse_json(r.try_get("before")?, "before")?,
                after: parse_json(r.try_get("after")?, "after")?,
                request_id: r.try_get("request_id")?,
            })
        }
    };
}

decode!(decode_sqlite, SqliteRow);
decode!(decode_pg, PgRow);
