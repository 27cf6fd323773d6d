//! The statements' plumbing: one [`Conn`] trait that both backends'
//! connections implement (one macro), so that the store's operations are
//! written once.

use std::future::Future;

use crate::error::Error;
use crate::limits::Limits;
use crate::model::{KeyRecord, KeyState, TenantRecord, TenantState, Tier};

/// One statement argument.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

/// `args![a, b, …]`: statement arguments, `$1` first.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        vec![$($crate::db::Arg::from($arg)),*]
    };
}
pub(crate) use args;

/// A key as stored: the record and the hash it is checked against.
#[derive(Debug, Clone)]
pub(crate) struct StoredKey {
    pub record: KeyRecord,
    pub hash: String,
}

/// A connection (or transaction) that runs the store's statements.
pub(crate) trait Conn: Send {
    fn tiers(
        &mut self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> impl Future<Output = Result<Vec<Tier>, Error>> + Send;
    fn tenants(
        &mut self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> impl Future<Output = Result<Vec<TenantRecord>, Error>> + Send;
    fn keys(
        &mut self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> impl Future<Output = Result<Vec<StoredKey>, Error>> + Send;
}

/// Reads a column of a result row by name.
pub(crate) trait Columns {
    fn int(&self, col: &'static str) -> Result<Option<i64>, sqlx::Error>;
    fn text(&self, col: &'static str) -> Result<Option<String>, sqlx::Error>;
}

fn required<T>(v: Option<T>, table: &str, col: &str) -> Result<T, Error> {
    v.ok_or_else(|| Error::Corrupt(format!("{table}.{col} is NULL")))
}

fn json<T: serde::de::DeserializeOwned>(s: &str, table: &str, col: &str) -> Result<T, Error> {
    serde_json::from_str(s).map_err(|e| Error::Corrupt(format!("{table}.{col}: {e}")))
}

pub(crate) fn decode_tier(row: &impl Columns) -> Result<Tier, Error> {
    let t = |c| required(row.text(c)?, "tiers", c);
    let i = |c| required(row.int(c)?, "tiers", c);
    Ok(Tier {
        name: t("name")?,
        limits: json::<Limits>(&t("limits")?, "tiers", "limits")?,
        budgets: json(&t("budgets")?, "tiers", "budgets")?,
        created_at: i("created_at")?,
        updated_at: i("updated_at")?,
    })
}

pub(crate) fn decode_tenant(row: &impl Columns) -> Result<TenantRecord, Error> {
    let t = |c| required(row.text(c)?, "tenants", c);
    let i = |c| required(row.int(c)?, "tenants", c);
    let state = t("state")?;
    Ok(TenantRecord {
        name: t("name")?,
        tier: row.text("tier")?,
        limits: json(&t("limits")?, "tenants", "limits")?,
        budgets: json(&t("budgets")?, "tenants", "budgets")?,
        tags: json(&t("tags")?, "tenants", "tags")?,
        state: TenantState::parse(&state)
            .ok_or_else(|| Error::Corrupt(format!("tenants.state {state:?}")))?,
        created_at: i("created_at")?,
        updated_at: i("updated_at")?,
    })
}

pub(crate) fn decode_key(row: &impl Columns) -> Result<StoredKey, Error> {
    let t = |c| required(row.text(c)?, "api_keys", c);
    let i = |c| required(row.int(c)?, "api_keys", c);
    let state = t("state")?;
    Ok(StoredKey {
        hash: t("hash")?,
        record: KeyRecord {
            id: t("id")?,
            tenant: t("tenant")?,
            name: row.text("name")?,
            tier: row.text("tier")?,
            limits: json(&t("limits")?, "api_keys", "limits")?,
            budgets: json(&t("budgets")?, "api_keys", "budgets")?,
            tags: json(&t("tags")?, "api_keys", "tags")?,
            state: KeyState::parse(&state)
                .ok_or_else(|| Error::Corrupt(format!("api_keys.state {state:?}")))?,
            grace_until: row.int("grace_until")?,
            replaced_by: row.text("replaced_by")?,
            created_at: i("created_at")?,
            updated_at: i("updated_at")?,
        },
    })
}

/// Implements [`Conn`] for the sqlx connection `$conn` of database `$db`
/// whose rows are `$row`.
macro_rules! impl_conn {
    ($conn:ty, $db:ty, $row:ty, $bind:ident) => {
        impl $crate::db::Columns for $row {
            fn int(&self, col: &'static str) -> Result<Option<i64>, sqlx::Error> {
                sqlx::Row::try_get(self, col)
            }

            fn text(&self, col: &'static str) -> Result<Option<String>, sqlx::Error> {
                sqlx::Row::try_get(self, col)
            }
        }

        impl $crate::db::Conn for $conn {
            async fn tiers(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::Tier>, $crate::Error> {
                let rows = $bind(sqlx::query(sql), args).fetch_all(&mut *self).await?;
                rows.iter().map($crate::db::decode_tier).collect()
            }

            async fn tenants(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::TenantRecord>, $crate::Error> {
                let rows = $bind(sqlx::query(sql), args).fetch_all(&mut *self).await?;
                rows.iter().map($crate::db::decode_tenant).collect()
            }

            async fn keys(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::db::StoredKey>, $crate::Error> {
                let rows = $bind(sqlx::query(sql), args).fetch_all(&mut *self).await?;
                rows.iter().map($crate::db::decode_key).collect()
            }
        }

        /// Binds `args` in order: `$1` first.
        fn $bind(
            mut query: sqlx::query::Query<'static, $db, <$db as sqlx::Database>::Arguments>,
            args: Vec<$crate::db::Arg>,
        ) -> sqlx::query::Query<'static, $db, <$db as sqlx::Database>::Arguments> {
            for arg in args {
                query = match arg {
                    $crate::db::Arg::Int(v) => query.bind(v),
                    $crate::db::Arg::Text(v) => query.bind(v),
                };
            }
            query
        }
    };
}

impl_conn!(
    sqlx::SqliteConnection,
    sqlx::Sqlite,
    sqlx::sqlite::SqliteRow,
    bind_sqlite
);
impl_conn!(
    sqlx::PgConnection,
    sqlx::Postgres,
    sqlx::postgres::PgRow,
    bind_postgres
);
