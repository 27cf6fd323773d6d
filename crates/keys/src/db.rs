//! The statements' plumbing: one [`Conn`] trait that both backends'
//! connections implement (one macro), so that the store's operations are
//! written once.

use std::future::Future;

use sluice_store::Columns;

use crate::error::Error;
use crate::limits::Limits;
use crate::model::{KeyRecord, KeyState, TenantRecord, TenantState, Tier};

pub(crate) use sluice_store::{Arg, args};

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

/// Implements [`Conn`] for the sqlx connection `$conn`.
macro_rules! impl_conn {
    ($conn:ty) => {
        impl $crate::db::Conn for $conn {
            async fn tiers(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::Tier>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter().map($crate::db::decode_tier).collect()
            }

            async fn tenants(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::TenantRecord>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter().map($crate::db::decode_tenant).collect()
            }

            async fn keys(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::db::Arg>,
            ) -> Result<Vec<$crate::db::StoredKey>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter().map($crate::db::decode_key).collect()
            }
        }
    };
}

impl_conn!(sqlx::SqliteConnection);
impl_conn!(sqlx::PgConnection);
