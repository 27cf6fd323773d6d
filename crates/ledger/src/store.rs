//! [`LedgerStore`]: `usage_records` and `usage_rollups` in SQLite or
//! PostgreSQL, with the schema embedded and its own migrations table (the
//! job, key and audit stores may share the database).

use std::path::Path;
use std::sync::OnceLock;

use sluice_store::{Pool, PoolOptions, Schema, Step};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row as _};

use crate::direct::Direct;
use crate::pg;
use crate::rollup::{Delta, Key, deltas};
use crate::{Dim, Error, Granularity, Query, Record, Row, SUMS, Totals};

const MIGRATIONS_TABLE: &str = "_sluice_ledger_migrations";

const SQLITE: Schema = Schema::new(&[
    Step::new(
        1,
        "usage ledger",
        include_str!("../migrations/sqlite/0001_ledger.sql"),
    ),
    Step::new(
        2,
        "record keys",
        include_str!("../migrations/sqlite/0002_record_keys.sql"),
    ),
    Step::new(
        3,
        "unpriced calls",
        include_str!("../migrations/sqlite/0003_unpriced.sql"),
    ),
    Step::new(
        4,
        "pool names",
        include_str!("../migrations/sqlite/0004_pool_names.sql"),
    ),
    Step::new(
        5,
        "bodies",
        include_str!("../migrations/sqlite/0005_bodies.sql"),
    ),
])
.table(MIGRATIONS_TABLE);

const POSTGRES: Schema = Schema::new(&[
    Step::new(
        1,
        "usage ledger",
        include_str!("../migrations/postgres/0001_ledger.sql"),
    ),
    Step::new(
        2,
        "record keys",
        include_str!("../migrations/postgres/0002_record_keys.sql"),
    ),
    Step::new(
        3,
        "unpriced calls",
        include_str!("../migrations/postgres/0003_unpriced.sql"),
    ),
    Step::new(
        4,
        "pool names",
        include_str!("../migrations/postgres/0004_pool_names.sql"),
    ),
    Step::new(
        5,
        "bodies",
        include_str!("../migrations/postgres/0005_bodies.sql"),
    ),
])
.table(MIGRATIONS_TABLE);

/// Records per INSERT statement: 25 binds a row, well under both
/// engines' bind limits.
const RECORDS_PER_INSERT: usize = 100;

/// Rollup rows per upsert: 14 binds a row.
const ROLLUPS_PER_UPSERT: usize = 200;

pub(crate) const RECORD_COLUMNS: &str = "uid, at_ms, request_id, tenant, key_id, user_tag, feature, kind, provider, model, endpoint, status, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, estimated, cost_nanos, latency_ms, queue_ms, retries, cache_hit, unpriced, alias, deployment";

/// Two connections: one background writer, and the usage API's reads.
const POOL: PoolOptions = PoolOptions::new(2);

/// The ledger's tables. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct LedgerStore {
    pub(crate) db: Pool,
    /// A SQLite file's writes, on the writer's thread (`direct.rs`);
    /// `None` for PostgreSQL and in-memory SQLite, written through `db`.
    direct: Option<Direct>,
}

impl LedgerStore {
    /// Opens (creating if needed) the SQLite file at `path` in WAL mode
    /// and brings its tables up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the file cannot be opened or the schema
    /// cannot be migrated.
    pub async fn open(path: impl AsRef<Path>) -> Result<LedgerStore, Error> {
        let pool = SQLITE.open_sqlite(path.as_ref(), POOL).await?;
        let direct = match Direct::open(path.as_ref()) {
            Ok(d) => d,
            Err(e) => {
                pool.close().await;
                return Err(Error::Sqlite(e));
            }
        };
        Ok(LedgerStore {
            db: Pool::Sqlite(pool),
            direct: Some(direct),
        })
    }

    /// A store in a private in-memory SQLite database.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn in_memory() -> Result<LedgerStore, Error> {
        let pool = SQLITE.sqlite_in_memory(POOL).await?;
        Ok(LedgerStore {
            db: Pool::Sqlite(pool),
            direct: None,
        })
    }

    /// Connects to PostgreSQL at `url` (a pool of up to 2 connections)
    /// and brings its tables up to date.
    ///
    /// # Errors
    /// [`Error::Database`] if the URL is bad, the server unreachable or
    /// the schema cannot be migrated.
    pub async fn connect(url: &str) -> Result<LedgerStore, Error> {
        let pool = POSTGRES.connect_postgres(url, POOL).await?;
        Ok(LedgerStore {
            db: Pool::Postgres(pool),
            direct: None,
        })
    }

    /// Closes the pool, waiting for connections in use (later calls
    /// fail).
    pub async fn close(&self) {
        if let Some(d) = &self.direct {
            d.close();
        }
        self.db.close().await;
    }

    /// Stores the records of `records` whose key ([`Record::key`]) is not
    /// stored yet and adds them (only them) to the rollups, in one
    /// transaction; returns how many were new. A batch written again
    /// (a spill file replayed twice, a batch spilled while its write went
    /// through after all) changes nothing; a key twice in `records`
    /// counts once.
    ///
    /// Into a SQLite file, the transaction runs on the calling thread,
    /// which it blocks until the commit (waiting up to 10 s for another
    /// writer): call it where that is fine, as the gateway's ledger
    /// writer does on a thread of its own. On a multi-threaded tokio
    /// runtime it tells the runtime first (`block_in_place`).
    ///
    /// # Errors
    /// [`Error::Database`], [`Error::Sqlite`] or [`Error::Closed`]; then
    /// none of them is stored.
    pub async fn insert(&self, records: &[Record]) -> Result<u64, Error> {
        if records.is_empty() {
            return Ok(0);
        }
        if let Some(direct) = &self.direct {
            return blocking(|| direct.insert(records));
        }
        let mut fresh: Vec<&Record> = Vec::with_capacity(records.len());
        match &self.db {
            Pool::Sqlite(pool) => {
                let mut tx = pool.begin().await?;
                for chunk in records.chunks(RECORDS_PER_INSERT) {
                    let rows = insert_records(chunk).build().fetch_all(&mut *tx).await?;
                    let keys = rows
                        .iter()
                        .map(|r| r.try_get::<String, _>(0))
                        .collect::<Result<Vec<_>, _>>()?;
                    stored(chunk, keys, &mut fresh);
                }
                let rollups: Vec<(Key, Delta)> =
                    deltas(fresh.iter().copied()).into_iter().collect();
                for chunk in rollups.chunks(ROLLUPS_PER_UPSERT) {
                    upsert_rollups(chunk).build().execute(&mut *tx).await?;
                }
                let bodies: Vec<&Record> = with_bodies(&fresh);
                for chunk in bodies.chunks(RECORDS_PER_INSERT) {
                    insert_bodies(chunk).build().execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let keys: Vec<String> = pg::insert_records(records)
                    .fetch_all(&mut *tx)
                    .await?
                    .iter()
                    .map(|r| r.try_get::<String, _>(0))
                    .collect::<Result<_, _>>()?;
                stored(records, keys, &mut fresh);
                let rollups: Vec<(Key, Delta)> =
                    deltas(fresh.iter().copied()).into_iter().collect();
                if !rollups.is_empty() {
                    pg::upsert_rollups(&rollups).execute(&mut *tx).await?;
                }
                let bodies: Vec<&Record> = with_bodies(&fresh);
                if !bodies.is_empty() {
                    pg::insert_bodies(&bodies).execute(&mut *tx).await?;
                }
                tx.commit().await?;
            }
        }
        Ok(fresh.len() as u64)
    }

    /// The rollups `query` selects, grouped as it asks, in bucket and
    /// group order.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn usage(&self, query: &Query) -> Result<Vec<Row>, Error> {
        match &self.db {
            Pool::Sqlite(pool) => {
                let rows = select_usage(query).build().fetch_all(pool).await?;
                rows.iter().map(|r| decode_sqlite(r, query)).collect()
            }
            Pool::Postgres(pool) => {
                let rows = select_usage(query).build().fetch_all(pool).await?;
                rows.iter().map(|r| decode_pg(r, query)).collect()
            }
        }
    }

    /// Sums over the raw records between `from_ms` and `to_ms` (of
    /// `tenant` only, when given).
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn totals(
        &self,
        from_ms: i64,
        to_ms: i64,
        tenant: Option<&str>,
    ) -> Result<Totals, Error> {
        match &self.db {
            Pool::Sqlite(pool) => {
                let row = select_totals(from_ms, to_ms, tenant)
                    .build()
                    .fetch_one(pool)
                    .await?;
                totals_sqlite(&row)
            }
            Pool::Postgres(pool) => {
                let row = select_totals(from_ms, to_ms, tenant)
                    .build()
                    .fetch_one(pool)
                    .await?;
                totals_pg(&row)
            }
        }
    }

    /// Up to `limit` raw records of `tenant` with ids above `after_id`,
    /// with their ids, in id order.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn records(
        &self,
        tenant: &str,
        after_id: i64,
        limit: u32,
    ) -> Result<Vec<(i64, Record)>, Error> {
        match &self.db {
            Pool::Sqlite(pool) => {
                let rows = select_records(tenant, after_id, limit)
                    .build()
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(record_sqlite).collect()
            }
            Pool::Postgres(pool) => {
                let rows = select_records(tenant, after_id, limit)
                    .build()
                    .fetch_all(pool)
                    .await?;
                rows.iter().map(record_pg).collect()
            }
        }
    }

    /// Deletes raw records before `records_before_ms`, and rollups of
    /// each granularity before its given time. Returns the rows deleted.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn purge(
        &self,
        records_before_ms: i64,
        rollups_before_ms: &[(Granularity, i64)],
    ) -> Result<u64, Error> {
        let mut deleted = 0;
        match &self.db {
            Pool::Sqlite(pool) => {
                for mut q in purges(records_before_ms, rollups_before_ms) {
                    deleted += q.build().execute(pool).await?.rows_affected();
                }
            }
            Pool::Postgres(pool) => {
                for mut q in purges(records_before_ms, rollups_before_ms) {
                    deleted += q.build().execute(pool).await?.rows_affected();
                }
            }
        }
        Ok(deleted)
    }
}

fn select_records<DB>(tenant: &str, after_id: i64, limit: u32) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("SELECT id, {RECORD_COLUMNS} FROM usage_records"));
    q.push(" WHERE tenant = ")
        .push_bind(tenant.to_owned())
        .push(" AND id > ")
        .push_bind(after_id)
        .push(" ORDER BY id LIMIT ")
        .push_bind(i64::from(limit));
    q
}

fn purges<DB>(records_before_ms: i64, rollups: &[(Granularity, i64)]) -> Vec<QueryBuilder<DB>>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    // A record's bodies go with it.
    let mut bodies = QueryBuilder::new("DELETE FROM usage_bodies WHERE at_ms < ");
    bodies.push_bind(records_before_ms);
    let mut q = QueryBuilder::new("DELETE FROM usage_records WHERE at_ms < ");
    q.push_bind(records_before_ms);
    let mut out = vec![bodies, q];
    for &(g, before) in rollups {
        let mut q = QueryBuilder::new("DELETE FROM usage_rollups WHERE granularity = ");
        q.push_bind(g.stored().as_str().to_owned())
            .push(" AND bucket_ms < ")
            .push_bind(before);
        out.push(q);
    }
    out
}

/// Runs `f`, which blocks, telling a multi-threaded runtime first so
/// that it moves its other tasks off this thread.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// Adds to `fresh` the records of `chunk` that an INSERT stored, given
/// the keys it returned (`RETURNING uid`: the rows it inserted, in no
/// promised order). Each key returned stands for one record: a key twice
/// in `chunk` was inserted once.
pub(crate) fn stored<'a>(chunk: &'a [Record], keys: Vec<String>, fresh: &mut Vec<&'a Record>) {
    if keys.len() == chunk.len() {
        // Every record was new (the common case): no lookups.
        fresh.extend(chunk);
        return;
    }
    let mut keys: std::collections::HashSet<String> = keys.into_iter().collect();
    fresh.extend(chunk.iter().filter(|r| keys.remove(r.key().as_ref())));
}

/// After an INSERT's values: a record whose key is stored already is
/// left out, and the keys of those stored are returned.
pub(crate) const ON_KEY: &str = " ON CONFLICT (uid) DO NOTHING";

fn insert_records<DB>(chunk: &[Record]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    bool: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<&'t str>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("INSERT INTO usage_records ({RECORD_COLUMNS}) "));
    q.push_values(chunk, |mut b, r| {
        b.push_bind(r.key().into_owned())
            .push_bind(r.at_ms)
            .push_bind(r.request_id.as_str())
            .push_bind(r.tenant.as_str())
            .push_bind(r.key_id.as_deref())
            .push_bind(r.user.as_deref())
            .push_bind(r.feature.as_deref())
            .push_bind(r.kind.as_str())
            .push_bind(r.provider.as_str())
            .push_bind(r.model.as_str())
            .push_bind(r.endpoint.as_str())
            .push_bind(i64::from(r.status))
            .push_bind(to_i64(r.prompt_tokens))
            .push_bind(to_i64(r.completion_tokens))
            .push_bind(to_i64(r.cached_tokens))
            .push_bind(to_i64(r.reasoning_tokens))
            .push_bind(r.estimated)
            .push_bind(to_i64(r.cost_nanos))
            .push_bind(to_i64(r.latency_ms))
            .push_bind(to_i64(r.queue_ms))
            .push_bind(i64::from(r.retries))
            .push_bind(r.cache_hit)
            .push_bind(i64::from(r.unpriced))
            .push_bind(r.alias.as_deref())
            .push_bind(r.deployment.as_deref());
    });
    q.push(ON_KEY).push(" RETURNING uid");
    q
}

/// The records of `fresh` (those a batch stored) that carry bodies.
pub(crate) fn with_bodies<'a>(fresh: &[&'a Record]) -> Vec<&'a Record> {
    fresh
        .iter()
        .copied()
        .filter(|r| r.bodies.is_some())
        .collect()
}

/// The columns of `usage_bodies`, in the order the writers bind them.
pub(crate) const BODY_COLUMNS: &str =
    "uid, at_ms, request, request_bytes, response, response_bytes";

/// Inserts the bodies of `chunk` (records that carry some), each once.
fn insert_bodies<'a, DB>(chunk: &[&'a Record]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(format!("INSERT INTO usage_bodies ({BODY_COLUMNS}) "));
    q.push_values(chunk, |mut b, r| {
        let bodies = r.bodies.clone().unwrap_or_default();
        b.push_bind(r.key().into_owned())
            .push_bind(r.at_ms)
            .push_bind(bodies.request)
            .push_bind(to_i64(bodies.request_bytes))
            .push_bind(bodies.response)
            .push_bind(to_i64(bodies.response_bytes));
    });
    q.push(ON_KEY);
    q
}

/// `INSERT INTO usage_rollups (…columns…) `, before the values.
pub(crate) fn rollup_head() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        format!(
            "INSERT INTO usage_rollups (granularity, bucket_ms, tenant, key_id, model, feature, {}) ",
            SUMS.join(", ")
        )
    })
}

/// After the values: a row that exists adds the deltas to its sums.
pub(crate) fn rollup_conflict() -> &'static str {
    static SQL: OnceLock<String> = OnceLock::new();
    SQL.get_or_init(|| {
        let sets: Vec<String> = SUMS
            .iter()
            .map(|c| format!("{c} = usage_rollups.{c} + excluded.{c}"))
            .collect();
        format!(
            " ON CONFLICT (granularity, bucket_ms, tenant, key_id, model, feature) DO UPDATE SET {}",
            sets.join(", ")
        )
    })
}

fn upsert_rollups<DB>(chunk: &[(Key<'_>, Delta)]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'t str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = QueryBuilder::new(rollup_head());
    q.push_values(chunk, |mut b, (k, d)| {
        b.push_bind(k.granularity)
            .push_bind(k.bucket_ms)
            .push_bind(k.tenant)
            .push_bind(k.key_id)
            .push_bind(k.model)
            .push_bind(k.feature)
            .push_bind(to_i64(d.requests))
            .push_bind(to_i64(d.errors))
            .push_bind(to_i64(d.prompt_tokens))
            .push_bind(to_i64(d.completion_tokens))
            .push_bind(to_i64(d.cached_tokens))
            .push_bind(to_i64(d.reasoning_tokens))
            .push_bind(to_i64(d.unpriced))
            .push_bind(to_i64(d.cost_nanos));
    });
    q.push(rollup_conflict());
    q
}

/// `SUM(col)` as a BIGINT (PostgreSQL sums BIGINTs to NUMERIC), 0 when
/// there are no rows.
fn sum(col: &str) -> String {
    format!("COALESCE(CAST(SUM({col}) AS BIGINT), 0) AS {col}")
}

fn select_usage<DB>(query: &Query) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    // Columns are named by enums here, never by input.
    let mut groups: Vec<&str> = Vec::new();
    if query.granularity != Granularity::Total {
        groups.push("bucket_ms");
    }
    groups.extend(query.group_by.iter().map(|d| d.column()));
    let mut columns: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    columns.extend(SUMS.iter().map(|c| sum(c)));
    let mut q = QueryBuilder::new(format!(
        "SELECT {} FROM usage_rollups WHERE granularity = ",
        columns.join(", ")
    ));
    q.push_bind(query.granularity.stored().as_str().to_owned())
        .push(" AND bucket_ms >= ")
        .push_bind(query.from_ms)
        .push(" AND bucket_ms < ")
        .push_bind(query.to_ms);
    if let Some(t) = &query.tenant {
        q.push(" AND tenant = ").push_bind(t.clone());
    }
    if !groups.is_empty() {
        let g = groups.join(", ");
        q.push(format!(" GROUP BY {g} ORDER BY {g}"));
    }
    let limit = query.limit.clamp(1, Query::MAX_ROWS);
    q.push(" LIMIT ").push_bind(to_i64(limit as u64));
    q
}

fn select_totals<DB>(from_ms: i64, to_ms: i64, tenant: Option<&str>) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    String: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let sums: Vec<String> = SUMS[2..].iter().map(|c| sum(c)).collect();
    let mut q = QueryBuilder::new(format!(
        "SELECT COUNT(*) AS records, {} FROM usage_records WHERE at_ms >= ",
        sums.join(", ")
    ));
    q.push_bind(from_ms).push(" AND at_ms < ").push_bind(to_ms);
    if let Some(t) = tenant {
        q.push(" AND tenant = ").push_bind(t.to_owned());
    }
    q
}

macro_rules! decoders {
    ($usage:ident, $totals:ident, $record:ident, $row:ty) => {
        fn $usage(r: &$row, query: &Query) -> Result<Row, Error> {
            let mut row = Row {
                bucket_ms: if query.granularity == Granularity::Total {
                    None
                } else {
                    Some(r.try_get("bucket_ms")?)
                },
                requests: to_u64(r.try_get("requests")?),
                errors: to_u64(r.try_get("errors")?),
                prompt_tokens: to_u64(r.try_get("prompt_tokens")?),
                completion_tokens: to_u64(r.try_get("completion_tokens")?),
                cached_tokens: to_u64(r.try_get("cached_tokens")?),
                reasoning_tokens: to_u64(r.try_get("reasoning_tokens")?),
                unpriced: to_u64(r.try_get("unpriced")?),
                cost_nanos: to_u64(r.try_get("cost_nanos")?),
                ..Row::default()
            };
            for d in &query.group_by {
                let v: String = r.try_get(d.column())?;
                match d {
                    Dim::Tenant => row.tenant = Some(v),
                    Dim::Key => row.key = Some(v),
                    Dim::Model => row.model = Some(v),
                    Dim::Feature => row.feature = Some(v),
                }
            }
            Ok(row)
        }

        fn $totals(r: &$row) -> Result<Totals, Error> {
            Ok(Totals {
                records: to_u64(r.try_get("records")?),
                prompt_tokens: to_u64(r.try_get("prompt_tokens")?),
                completion_tokens: to_u64(r.try_get("completion_tokens")?),
                cached_tokens: to_u64(r.try_get("cached_tokens")?),
                reasoning_tokens: to_u64(r.try_get("reasoning_tokens")?),
                unpriced: to_u64(r.try_get("unpriced")?),
                cost_nanos: to_u64(r.try_get("cost_nanos")?),
            })
        }

        pub(crate) fn $record(r: &$row) -> Result<(i64, Record), Error> {
            let status: i64 = r.try_get("status")?;
            let retries: i64 = r.try_get("retries")?;
            Ok((
                r.try_get("id")?,
                Record {
                    uid: r.try_get::<Option<String>, _>("uid")?.unwrap_or_default(),
                    at_ms: r.try_get("at_ms")?,
                    request_id: r.try_get("request_id")?,
                    tenant: r.try_get("tenant")?,
                    key_id: r.try_get("key_id")?,
                    user: r.try_get("user_tag")?,
                    feature: r.try_get("feature")?,
                    kind: r.try_get("kind")?,
                    provider: r.try_get("provider")?,
                    model: r.try_get("model")?,
                    endpoint: r.try_get("endpoint")?,
                    status: u16::try_from(status).unwrap_or(0),
                    prompt_tokens: to_u64(r.try_get("prompt_tokens")?),
                    completion_tokens: to_u64(r.try_get("completion_tokens")?),
                    cached_tokens: to_u64(r.try_get("cached_tokens")?),
                    reasoning_tokens: to_u64(r.try_get("reasoning_tokens")?),
                    estimated: r.try_get("estimated")?,
                    cost_nanos: to_u64(r.try_get("cost_nanos")?),
                    latency_ms: to_u64(r.try_get("latency_ms")?),
                    queue_ms: to_u64(r.try_get("queue_ms")?),
                    retries: u32::try_from(retries).unwrap_or(0),
                    cache_hit: r.try_get("cache_hit")?,
                    unpriced: r.try_get::<i64, _>("unpriced")? != 0,
                    alias: r.try_get("alias")?,
                    deployment: r.try_get("deployment")?,
                    bodies: None,
                },
            ))
        }
    };
}

decoders!(decode_sqlite, totals_sqlite, record_sqlite, SqliteRow);
decoders!(decode_pg, totals_pg, record_pg, PgRow);

impl sluice_spool::Sink<Record> for LedgerStore {
    type Error = Error;

    async fn write(&self, batch: &[Record]) -> Result<(), Error> {
        self.insert(batch).await.map(drop)
    }
}
